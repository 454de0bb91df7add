// `node dist/examples/werewolf/main.js [HUB_URL]`: plays one round of
// Werewolf against a running `switchboard serve` (default http://127.0.0.1:7420).

import { playRound } from "./game.js";

const base = process.argv[2] ?? "http://127.0.0.1:7420";
const summary = await playRound(base);
console.log(`wolves:        ${summary.wolves.join(", ")}`);
console.log(`night victim:  ${summary.victim}`);
console.log(`night blocked: ${summary.nightBlocked} town-square message(s)`);
console.log(`wolf chat:     ${summary.wolfChatRecipients.length} message(s), each to ${JSON.stringify(summary.wolfChatRecipients[0])}`);
console.log(`turn order:    ${summary.turnOrder.join(", ")}`);
console.log(`day speakers:  ${summary.speakers.join(", ")}`);
console.log(`lynched:       ${summary.lynched}`);
console.log(summary.wolves.includes(summary.lynched) ? "The village caught a wolf." : "The wolves fooled the village.");
