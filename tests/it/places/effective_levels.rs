//! principal × place × action → Allow, or Deny with its reason (ADR 0020 §6
//! `places::effective_levels`), on SQLite and PostgreSQL.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{list_as, ok, refused, send_as};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{
    call, expect, grant, on_channel, on_space, principal, world, Member, World,
};
use crate::support::{RawSocket, TestHub};

#[derive(Clone, Copy, Debug)]
enum Want {
    Allow,
    /// Hidden or missing: the unknown conversation's answer.
    NotFound,
    Forbidden(&'static str),
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Send,
    List,
}

fn judge(frame: &Value, want: Want, label: &str) {
    match want {
        Want::Allow => assert!(frame.get("result").is_some(), "{label}: {frame}"),
        Want::NotFound => {
            assert_eq!(refused(frame, "NotFoundError"), "", "{label}");
            assert_eq!(frame["error"]["message"], json!("conversation not found"));
        }
        Want::Forbidden(reason) => {
            assert_eq!(refused(frame, "ForbiddenError"), reason, "{label}: {frame}")
        }
    }
}

struct Sockets {
    alex: RawSocket,
    sam: RawSocket,
    robin: RawSocket,
    helper: RawSocket,
    scout: RawSocket,
    bot: RawSocket,
}

impl Sockets {
    fn of(&mut self, w: &World, who: &Member) -> &mut RawSocket {
        match who.id {
            id if id == w.alex.id => &mut self.alex,
            id if id == w.sam.id => &mut self.sam,
            id if id == w.robin.id => &mut self.robin,
            id if id == w.helper.id => &mut self.helper,
            id if id == w.scout.id => &mut self.scout,
            _ => &mut self.bot,
        }
    }
}

async fn run(w: &World, s: &mut Sockets, rows: &[(&str, &Member, Uuid, Act, Want)]) {
    for (label, who, place, act, want) in rows {
        let socket = s.of(w, who);
        let frame = match act {
            Act::Send => send_as(socket, who, *place, label, json!({})).await,
            Act::List => list_as(socket, who, json!({ "conversationId": place })).await,
        };
        judge(&frame, *want, label);
    }
}

async fn levels_decide(options: Options) {
    let w = world(options).await;
    let mut s = Sockets {
        alex: w.connect(&w.alex).await,
        sam: w.connect(&w.sam).await,
        robin: w.connect(&w.robin).await,
        helper: w.connect(&w.helper).await,
        scout: w.connect(&w.scout).await,
        bot: w.connect(&w.bot).await,
    };
    use Act::{List, Send};
    use Want::{Allow, Forbidden, NotFound};
    let (alex, sam, robin) = (&w.alex, &w.sam, &w.robin);
    let (helper, scout, bot) = (&w.helper, &w.scout, &w.bot);
    let table = [
        ("sam reads general", sam, w.general, List, Allow),
        (
            "sam may not write general",
            sam,
            w.general,
            Send,
            Forbidden("level_insufficient"),
        ),
        (
            "sam reads escalation by the space",
            sam,
            w.escalation,
            List,
            Allow,
        ),
        ("sam sees nothing of research", sam, w.notes, List, NotFound),
        (
            "robin writes notes by the group",
            robin,
            w.notes,
            Send,
            Allow,
        ),
        (
            "robin has nothing on marketing",
            robin,
            w.campaigns,
            List,
            NotFound,
        ),
        (
            "robin has nothing on support",
            robin,
            w.general,
            Send,
            NotFound,
        ),
        (
            "alex writes as the space's admin",
            alex,
            w.general,
            Send,
            Allow,
        ),
        ("alex writes notes", alex, w.notes, Send, Allow),
        (
            "alex has nothing on marketing",
            alex,
            w.campaigns,
            Send,
            NotFound,
        ),
        (
            "helper writes notes by the group",
            helper,
            w.notes,
            Send,
            Allow,
        ),
        (
            "owning helper gives it nothing of alex's",
            helper,
            w.general,
            List,
            NotFound,
        ),
        ("scout has no grant", scout, w.notes, List, NotFound),
        (
            "the bot writes general by its grant",
            bot,
            w.general,
            Send,
            Allow,
        ),
        (
            "the bot writes notes by the group",
            bot,
            w.notes,
            Send,
            Allow,
        ),
        (
            "the bot has nothing on escalation",
            bot,
            w.escalation,
            Send,
            NotFound,
        ),
    ];
    run(&w, &mut s, &table).await;

    // A channel grant above its space's wins on that channel only.
    grant(
        &w.hub,
        &alex.key,
        principal(sam.id),
        on_channel(w.escalation),
        "write",
    )
    .await;
    let table = [
        (
            "sam writes escalation by its grant",
            sam,
            w.escalation,
            Send,
            Allow,
        ),
        (
            "sam still only reads general",
            sam,
            w.general,
            Send,
            Forbidden("level_insufficient"),
        ),
    ];
    run(&w, &mut s, &table).await;

    // A group's admin gives the app write only: in a read-only channel the
    // group's people and agents write, the app does not.
    let group = json!({ "groupId": w.researchers });
    grant(&w.hub, ADMIN_TOKEN, group, on_space(w.research), "admin").await;
    set_state(&w.hub, &alex.key, w.notes, "read_only", 200).await;
    let table = [
        (
            "robin, admin by the group, writes read-only notes",
            robin,
            w.notes,
            Send,
            Allow,
        ),
        (
            "helper, admin by the group, writes read-only notes",
            helper,
            w.notes,
            Send,
            Allow,
        ),
        (
            "the bot is capped at write",
            bot,
            w.notes,
            Send,
            Forbidden("channel_read_only"),
        ),
    ];
    run(&w, &mut s, &table).await;
    set_state(&w.hub, &alex.key, w.notes, "open", 200).await;

    app_cap_is_refused(&w).await;
    who_manages(&w).await;
    messages_over_rest(&w).await;
    lists_hold_what_one_reads(&w, &mut s).await;
    a_channel_admin_manages_the_channel_not_its_space(&w).await;
}

/// A person whose only grant is admin on a channel knows its space (200 on
/// the space), manages the channel (its state, its grants), but is refused
/// the space's management with `level_insufficient`, not hidden.
async fn a_channel_admin_manages_the_channel_not_its_space(w: &World) {
    let casey = crate::support::world::person(&w.hub, "Casey").await;
    let admin = "admin";
    grant(
        &w.hub,
        ADMIN_TOKEN,
        principal(casey.id),
        on_channel(w.campaigns),
        admin,
    )
    .await;
    let space = format!("/api/v1/spaces/{}", w.marketing);
    expect(&w.hub, Method::GET, &space, &casey.key, None, 200).await;
    let create = format!("{space}/channels");
    let body = Some(json!({ "name": "launch" }));
    let v = expect(&w.hub, Method::POST, &create, &casey.key, body, 403).await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
    let on_space_grants = format!("/api/v1/grants?spaceId={}", w.marketing);
    let v = expect(&w.hub, Method::GET, &on_space_grants, &casey.key, None, 403).await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
    let body = Some(json!({
        "subject": principal(w.sam.id), "place": on_space(w.marketing), "level": "read"
    }));
    let v = expect(
        &w.hub,
        Method::POST,
        "/api/v1/grants",
        &casey.key,
        body,
        403,
    )
    .await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
    // The channel itself is Casey's to manage.
    set_state(&w.hub, &casey.key, w.campaigns, "read_only", 200).await;
    set_state(&w.hub, &casey.key, w.campaigns, "open", 200).await;
    let on_channel_grants = format!("/api/v1/grants?channelId={}", w.campaigns);
    expect(
        &w.hub,
        Method::GET,
        &on_channel_grants,
        &casey.key,
        None,
        200,
    )
    .await;
    let given = grant(
        &w.hub,
        &casey.key,
        principal(w.sam.id),
        on_channel(w.campaigns),
        "read",
    )
    .await;
    let path = format!("/api/v1/grants/{}", given["grantId"].as_str().unwrap());
    expect(&w.hub, Method::DELETE, &path, &casey.key, None, 204).await;
    // A stranger to the space still finds none of it.
    let v = expect(
        &w.hub,
        Method::POST,
        &create,
        &w.sam.key,
        Some(json!({ "name": "x" })),
        404,
    )
    .await;
    assert_eq!(v["error"]["message"], json!("space not found"), "{v}");
}

pub(super) async fn set_state(hub: &TestHub, token: &str, channel: Uuid, state: &str, want: u16) {
    let path = format!("/api/v1/channels/{channel}");
    let body = Some(json!({ "state": state }));
    let v = expect(hub, Method::PATCH, &path, token, body, want).await;
    if want == 200 {
        assert_eq!(v["channel"]["state"], json!(state), "{v}");
    }
}

/// A grant above write naming an app is 400 `level_above_app_cap` at
/// `/level`, whoever grants it.
async fn app_cap_is_refused(w: &World) {
    for (token, level) in [(&w.alex.key, "admin"), (&w.alex.key, "trigger")] {
        let body = json!({ "subject": principal(w.bot.id), "place": on_channel(w.general), "level": level });
        let v = expect(
            &w.hub,
            Method::POST,
            "/api/v1/grants",
            token,
            Some(body),
            400,
        )
        .await;
        assert_eq!(v["error"]["code"], json!("level_above_app_cap"), "{v}");
        assert_eq!(v["error"]["details"][0]["pointer"], json!("/level"), "{v}");
    }
    let body =
        json!({ "subject": principal(w.bot.id), "place": on_channel(w.general), "level": "admin" });
    let v = expect(
        &w.hub,
        Method::POST,
        "/api/v1/grants",
        ADMIN_TOKEN,
        Some(body),
        400,
    )
    .await;
    assert_eq!(v["error"]["code"], json!("level_above_app_cap"), "{v}");
}

/// Alex creates channels in a space it administers, and gets the unknown
/// space's 404 on Marketing; Sam, a reader, is refused creating one.
async fn who_manages(w: &World) {
    let path = format!("/api/v1/spaces/{}/channels", w.support);
    let body = Some(json!({ "name": "triage" }));
    expect(&w.hub, Method::POST, &path, &w.alex.key, body.clone(), 201).await;
    let v = expect(&w.hub, Method::POST, &path, &w.alex.key, body.clone(), 409).await;
    assert_eq!(v["error"]["details"][0]["pointer"], json!("/name"), "{v}");
    let v = expect(&w.hub, Method::POST, &path, &w.sam.key, body, 403).await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
    let path = format!("/api/v1/spaces/{}/channels", w.marketing);
    let body = Some(json!({ "name": "launch" }));
    let v = expect(&w.hub, Method::POST, &path, &w.alex.key, body, 404).await;
    assert_eq!(v["error"]["message"], json!("space not found"), "{v}");
    let bad = Some(json!({ "name": "Not A Name" }));
    let path = format!("/api/v1/spaces/{}/channels", w.support);
    let v = expect(&w.hub, Method::POST, &path, &w.alex.key, bad, 400).await;
    assert_eq!(v["error"]["details"][0]["pointer"], json!("/name"), "{v}");
    // Sam reads Support (a grant on the space), not Research.
    let path = format!("/api/v1/spaces/{}", w.support);
    let v = expect(&w.hub, Method::GET, &path, &w.sam.key, None, 200).await;
    assert_eq!(v["space"]["name"], json!("Support"));
    let path = format!("/api/v1/spaces/{}", w.research);
    let a = call(&w.hub, Method::GET, &path, &w.sam.key, None).await;
    assert_eq!(a.status, 404, "{}", a.body);
    // Grants on a place are listed by its admin, hidden from its readers.
    let path = format!("/api/v1/grants?spaceId={}", w.support);
    let v = expect(&w.hub, Method::GET, &path, &w.alex.key, None, 200).await;
    let holders: Vec<&Value> = v["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["subject"])
        .collect();
    assert!(holders.contains(&&principal(w.sam.id)), "{v}");
    let v = expect(&w.hub, Method::GET, &path, &w.sam.key, None, 403).await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
}

fn ids(frame: &Value) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = ok(frame)["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().parse().unwrap())
        .collect();
    ids.sort();
    ids
}

/// `*/channel/list` holds the channels one reads, and REST's list of a
/// space the same.
async fn lists_hold_what_one_reads(w: &World, s: &mut Sockets) {
    let list = |p: Value| p;
    let robin = s
        .robin
        .call(json!(1), "person/channel/list", list(json!({})))
        .await;
    assert_eq!(ids(&robin), vec![w.notes]);
    let bot = s.bot.call(json!(1), "app/channel/list", json!({})).await;
    let mut want = vec![w.general, w.notes];
    want.sort();
    assert_eq!(ids(&bot), want);
    let scout = s
        .scout
        .call(json!(1), "agent/channel/list", json!({}))
        .await;
    assert_eq!(ids(&scout), Vec::<Uuid>::new());
    let alex = s
        .alex
        .call(
            json!(1),
            "person/channel/list",
            json!({ "spaceId": w.research }),
        )
        .await;
    assert_eq!(ids(&alex), vec![w.notes]);
    let path = format!("/api/v1/spaces/{}/channels", w.support);
    let v = expect(&w.hub, Method::GET, &path, &w.sam.key, None, 200).await;
    let names: Vec<&str> = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"general") && names.contains(&"escalation"),
        "{v}"
    );
}

/// `GET|POST /api/v1/conversations/{id}/messages` decide as the gateway.
async fn messages_over_rest(w: &World) {
    let path = |c: Uuid| format!("/api/v1/conversations/{c}/messages");
    let body = |s: &str| Some(json!({ "parts": [{ "type": "text", "text": s }] }));
    let v = expect(
        &w.hub,
        Method::POST,
        &path(w.general),
        &w.sam.key,
        body("no"),
        403,
    )
    .await;
    assert_eq!(v["error"]["reason"], json!("level_insufficient"), "{v}");
    let v = expect(
        &w.hub,
        Method::POST,
        &path(w.general),
        &w.alex.key,
        body("by rest"),
        201,
    )
    .await;
    assert_eq!(v["message"]["conversationId"], json!(w.general), "{v}");
    expect(
        &w.hub,
        Method::POST,
        &path(w.general),
        &w.bot.key,
        body("bot by rest"),
        201,
    )
    .await;
    let v = expect(&w.hub, Method::GET, &path(w.general), &w.sam.key, None, 200).await;
    let texts: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert!(
        texts.contains(&"by rest") && texts.contains(&"bot by rest"),
        "{v}"
    );
    let v = expect(
        &w.hub,
        Method::GET,
        &path(w.general),
        &w.robin.key,
        None,
        404,
    )
    .await;
    assert_eq!(
        v["error"]["message"],
        json!("conversation not found"),
        "{v}"
    );
    let threaded =
        Some(json!({ "parts": [{ "type": "text", "text": "x" }], "threadId": Uuid::new_v4() }));
    let v = expect(
        &w.hub,
        Method::POST,
        &path(w.notes),
        &w.robin.key,
        threaded,
        400,
    )
    .await;
    assert_eq!(
        v["error"]["details"][0]["pointer"],
        json!("/threadId"),
        "{v}"
    );
    let conversation = format!("/api/v1/conversations/{}", w.general);
    let v = expect(&w.hub, Method::GET, &conversation, &w.sam.key, None, 200).await;
    assert_eq!(v["conversation"]["kind"], json!("channel"), "{v}");
    super::rest_inputs::rest_inputs_are_named(w).await;
}

#[tokio::test]
async fn levels_decide_every_principal_on_every_place() {
    levels_decide(TestHub::fast_options()).await;
}

#[tokio::test]
async fn levels_decide_every_principal_on_every_place_on_postgres() {
    let options = Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    };
    levels_decide(options).await;
}
