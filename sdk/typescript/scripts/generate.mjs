#!/usr/bin/env node
// Generates src/generated/schemas.ts from the hub's exported catalogue:
// the types from ../../schemas/*.json (json-schema-to-typescript), and the
// method and event maps from ../../rpc/openrpc.json (direction, caller,
// recipient). `npm run generate` writes the committed file; the test suite
// runs this script into a temporary file and fails when the two differ.
//
// Usage: node scripts/generate.mjs OUTPUT_FILE
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compile } from "json-schema-to-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..", "..");
const schemasDir = join(repo, "schemas");
const openrpcPath = join(repo, "rpc", "openrpc.json");

/** `agent.message.send.params` -> `AgentMessageSendParams`. */
function typeName(stem) {
  return stem
    .split(/[.\-/_]/)
    .filter(Boolean)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join("");
}

/** Every file's `$defs` in one place; two files defining one name differently is an error. */
function mergeDefs(files) {
  const defs = {};
  for (const { file, schema } of files) {
    for (const [name, def] of Object.entries(schema.$defs ?? {})) {
      if (name in defs && JSON.stringify(defs[name]) !== JSON.stringify(def)) {
        throw new Error(`${file}: $defs/${name} differs from another schema's`);
      }
      defs[name] = def;
    }
  }
  return defs;
}

function loadSchemas() {
  return readdirSync(schemasDir)
    .filter((f) => f.endsWith(".schema.json"))
    .sort()
    .map((file) => ({
      file,
      stem: file.replace(/\.schema\.json$/, ""),
      schema: JSON.parse(readFileSync(join(schemasDir, file), "utf8")),
    }));
}

const ANNOTATIONS = new Set(["$ref", "description", "title", "default", "examples"]);

/**
 * A `$ref` with only annotations beside it is the referenced type: strip the
 * annotations so the compiler reuses the named type instead of minting
 * `Conversation1` copies.
 */
function bareRefs(node) {
  if (Array.isArray(node)) return node.map(bareRefs);
  if (node === null || typeof node !== "object") return node;
  if (typeof node.$ref === "string" && Object.keys(node).every((k) => ANNOTATIONS.has(k))) {
    return { $ref: node.$ref };
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, bareRefs(v)]));
}

/** One root schema whose `$defs` hold every shared definition and every file's top level. */
function rootSchema(files) {
  const defs = mergeDefs(files);
  const properties = {};
  const aliases = [];
  for (const { file, stem, schema } of files) {
    // A whole-file schema named like a shared definition (manifest) is the document form.
    const name = typeName(stem) in defs ? `${typeName(stem)}Document` : typeName(stem);
    const { $schema, $defs, title, ...top } = schema;
    if (name in defs) throw new Error(`${file}: type name ${name} is also a $defs name`);
    if (typeof top.$ref === "string" && Object.keys(top).every((k) => ANNOTATIONS.has(k))) {
      aliases.push(`export type ${name} = ${top.$ref.replace("#/$defs/", "")};`);
      continue;
    }
    defs[name] = { ...top, title: name, description: top.description ?? `\`${title}\` (schemas/${file}).` };
    properties[name] = { $ref: `#/$defs/${name}` };
  }
  const schema = {
    title: "SwitchboardSchemas",
    description: "Every schema the hub exports, by name.",
    type: "object",
    properties,
    additionalProperties: false,
    $defs: defs,
  };
  return { schema: bareRefs(schema), aliases };
}

function methodMaps(stems) {
  const has = (stem) => stems.has(stem);
  const openrpc = JSON.parse(readFileSync(openrpcPath, "utf8"));
  const groups = { ConnectMethods: [], AgentMethods: [], AppMethods: [], PersonMethods: [], AppCallbacks: [] };
  const events = { AgentEvents: [], AppEvents: [], PersonEvents: [] };
  for (const m of openrpc.methods) {
    const stem = m.name.replaceAll("/", ".");
    const params = has(`${stem}.params`) ? typeName(`${stem}.params`) : "Record<string, never>";
    const result = has(`${stem}.result`) ? typeName(`${stem}.result`) : "unknown";
    const entry = `  ${JSON.stringify(m.name)}: { params: ${params}; result: ${result} };`;
    if (m["x-direction"] === "peer-to-hub") {
      const caller = m["x-caller"];
      const group = caller === "unauthenticated" ? "ConnectMethods" : `${caller[0].toUpperCase()}${caller.slice(1)}Methods`;
      if (!(group in groups)) throw new Error(`${m.name}: unknown caller ${caller}`);
      groups[group].push(entry);
    } else if (m["x-notification"]) {
      const r = m["x-recipient"];
      events[`${r[0].toUpperCase()}${r.slice(1)}Events`].push(`  ${JSON.stringify(m.name)}: ${params};`);
    } else {
      groups.AppCallbacks.push(entry);
    }
  }
  const out = [];
  const doc = {
    ConnectMethods: "The connects, the first call on a socket.",
    AgentMethods: "What an agent may call: method name to params and result.",
    AppMethods: "What an app may call: method name to params and result.",
    PersonMethods: "What a person may call: method name to params and result.",
    AppCallbacks: "What the hub calls on an app (the three gates and ping).",
    AgentEvents: "Events an agent receives: type to envelope.",
    AppEvents: "Events an app receives: type to envelope.",
    PersonEvents: "Events a person receives: type to envelope.",
  };
  for (const [name, lines] of Object.entries({ ...groups, ...events })) {
    out.push(`/** ${doc[name]} */`, `export interface ${name} {`, ...lines, "}", "");
  }
  return out.join("\n");
}

async function main() {
  const output = process.argv[2];
  if (!output) throw new Error("usage: generate.mjs OUTPUT_FILE");
  const files = loadSchemas();
  const { schema, aliases } = rootSchema(files);
  const types = await compile(schema, "SwitchboardSchemas", {
    bannerComment:
      "/* Generated by scripts/generate.mjs from schemas/ and rpc/openrpc.json: do not edit; run `npm run generate`. */",
    additionalProperties: false,
    // The schemas bound item counts (`parts` 1 to 16, ...); as tuple types
    // those would refuse every plain array. The bounds stay in the schemas.
    ignoreMinAndMaxItems: true,
    unreachableDefinitions: true,
    format: true,
    style: { printWidth: 100 },
  });
  const maps = methodMaps(new Set(files.map((f) => f.stem)));
  mkdirSync(dirname(resolve(output)), { recursive: true });
  writeFileSync(output, `${types}\n${aliases.join("\n")}\n\n${maps}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
