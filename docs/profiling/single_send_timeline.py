"""Per-send timeline of `bench --scenario fanout --inflight 1` from a perf script dump.

Used for docs/benchmarks.md, "Where a single send's time goes (2026-12-01)";
the probes and the perf command that produce the input are listed there.
Sends are cut at each BEGIN; the first 50 and last 5 are dropped (warm-up, end).
Frame lengths 0x274 (a delivery, N = 10) and 0x11b (a send request) are
specific to the bench's payload; adjust them if the payload changes.
"""
import re,statistics as st,sys
ev=[]
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)<3: continue
    try: t=float(p[1].rstrip(':'))*1e6
    except ValueError: continue
    ev.append((p[0],t,p[2].rstrip(':').split(':')[-1],l))
cyc=[];cur=None;openstep=None
for tid,t,e,l in ev:
    if e=='exec' and 'sql="BEGIN' in l:
        cur={'begin':t,'st':[],'sw':0,'wk':0,'pw':0,'pr':0};cyc.append(cur);continue
    if cur is None: continue
    if e=='step':
        m=re.search(r'sql="([A-Za-z_ ]+)',l);openstep=(t,' '.join(m.group(1).split()[:3]) if m else '?')
    elif e=='stepret__return' and openstep:
        cur['st'].append((openstep[0],t,openstep[1]));openstep=None
    elif e=='exec' and 'COMMIT' in l: cur['commit']=t
    elif e=='sys_enter_fsync': cur.setdefault('fs',t)
    elif e=='sys_exit_fsync': cur.setdefault('fe',t)
    elif e=='sys_enter_sendto' and 'len: 0x00000274' in l: cur.setdefault('d0',t);cur['d1']=t
    elif e=='sys_enter_sendto' and 'len: 0x0000011b' in l: cur.setdefault('next',t)
    elif e=='sys_exit_recvfrom' and l.split()[-1]=='0x11b': cur.setdefault('hubrecv',t)
    elif e=='sched_switch' and 'prev_comm=swapper' not in l: cur['sw']+=1
    elif e=='sched_wakeup': cur['wk']+=1
    elif e=='sys_enter_pwrite64': cur['pw']+=1
    elif e=='sys_enter_pread64': cur['pr']+=1
cyc=cyc[50:-5]
for a,b in zip(cyc,cyc[1:]): a['nextbegin']=b['begin']
cyc=[c for c in cyc if all(k in c for k in ('commit','fs','fe','d0','d1','next','hubrecv','nextbegin'))]
def M(f): return st.median([f(c) for c in cyc])
def sql(c,pref): return [s for s in c['st'] if s[2].startswith(pref)]
def inside(c):  # time inside sqlite3_step for non-COMMIT statements
    return sum(b-a for a,b,n in c['st'] if n not in ('COMMIT',))
commitdur=lambda c:[b-a for a,b,n in c['st'] if n=='COMMIT'][0]
print('n',len(cyc))
print('cycle BEGIN->next BEGIN', M(lambda c:c['nextbegin']-c['begin']))
print('BEGIN->COMMIT exec (statements)', M(lambda c:c['commit']-c['begin']))
print('  of which inside sqlite3_step', M(inside))
for p in ['BEGIN','UPDATE','INSERT INTO messages','INSERT INTO message_recipients','INSERT INTO event_streams','INSERT INTO events']:
    print('   ',p, 'steps',M(lambda c:len(sql(c,p))),'inside',M(lambda c:sum(b-a for a,b,n in sql(c,p))))
print('  upsert first step -> last step (row by row to async side)', M(lambda c:sql(c,'INSERT INTO event_streams')[-1][1]-sql(c,'INSERT INTO event_streams')[0][0]))
print('COMMIT step total', M(commitdur))
print('  COMMIT exec -> fsync enter (WAL pwrites)', M(lambda c:c['fs']-c['commit']))
print('  fsync', M(lambda c:c['fe']-c['fs']))
print('fsync exit -> first delivery write', M(lambda c:c['d0']-c['fe']))
print('deliveries written', M(lambda c:c['d1']-c['d0']))
print('last delivery -> next send written (bench client)', M(lambda c:c['next']-c['d1']))
print('next send written -> hub read', M(lambda c:c['hubrecv']-c['next']))
print('hub read -> next BEGIN', M(lambda c:c['nextbegin']-c['hubrecv']))
print('switches',M(lambda c:c['sw']),'wakeups',M(lambda c:c['wk']),'pwrite',M(lambda c:c['pw']),'pread',M(lambda c:c['pr']))
