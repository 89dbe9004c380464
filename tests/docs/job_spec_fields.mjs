// docs/job-spec.md against the job spec the daemon serves: the OpenAPI document's JobSpec schema,
// read from the same source the daemon compiles (src/server/http/openapi.cc), so the page cannot
// fall behind the API. Checks, for every field the schema lists (nested ones as dotted paths:
// `topology.required`, `plan.tp`, `stage[].kind`, `federation.deadline`):
//   - the page has a table row for it whose first cell is the path in backticks;
//   - that row names each of the field's allowed values (enums) and its default, in backticks;
// and, the other way, that every path the page's tables document is still in the schema.
// Usage: node tests/docs/job_spec_fields.mjs SOURCE_DIR
import { readFileSync } from "node:fs";
import { join } from "node:path";

const src = process.argv[2] || process.env.BATON_SOURCE_DIR || ".";
const cc = readFileSync(join(src, "src/server/http/openapi.cc"), "utf8");
const begin = cc.indexOf('R"json(');
const end = cc.indexOf(')json"');
if (begin < 0 || end < begin) {
  console.log("FAIL: no R\"json(...)json\" document in src/server/http/openapi.cc");
  process.exit(1);
}
const openapi = JSON.parse(cc.slice(begin + 'R"json('.length, end));
const schemas = openapi.components.schemas;

function resolve(schema) {
  while (schema && schema.$ref) schema = schemas[schema.$ref.replace("#/components/schemas/", "")];
  return schema;
}

// Every field of the schema as a dotted path, with the values it allows and its default.
const fields = new Map();
function walk(schema, prefix) {
  schema = resolve(schema);
  for (const [key, raw] of Object.entries(schema.properties || {})) {
    const path = prefix ? `${prefix}.${key}` : key;
    const s = resolve(raw);
    const enums = new Set(s.enum || []);
    for (const alt of s.oneOf || []) for (const v of resolve(alt).enum || []) enums.add(v);
    fields.set(path, { enums: [...enums], default: s.default });
    if (s.properties) walk(s, path);
    const items = resolve(s.items);
    if (items && items.properties) walk(items, `${path}[]`);
  }
}
walk(schemas.JobSpec, "");

// The page's table rows, by the backticked path in their first cell.
const page = readFileSync(join(src, "docs/job-spec.md"), "utf8").split("\n");
const rows = new Map();
page.forEach((line, i) => {
  const m = line.match(/^\|\s*`([A-Za-z_][A-Za-z0-9_.[\]]*)`\s*\|/);
  if (m) rows.set(m[1], { line, number: i + 1 });
});

const problems = [];
for (const [path, field] of fields) {
  const row = rows.get(path);
  if (!row) {
    problems.push(`field '${path}' is in the OpenAPI JobSpec but has no row in docs/job-spec.md`);
    continue;
  }
  for (const v of field.enums) {
    if (!row.line.includes("`" + v + "`")) {
      problems.push(`docs/job-spec.md:${row.number}: '${path}' does not name its value \`${v}\``);
    }
  }
  if (field.default !== undefined && !row.line.includes("`" + JSON.stringify(field.default) + "`")) {
    problems.push(`docs/job-spec.md:${row.number}: '${path}' does not give its default ` +
                  `\`${JSON.stringify(field.default)}\``);
  }
}
for (const [path, row] of rows) {
  if (!fields.has(path)) {
    problems.push(`docs/job-spec.md:${row.number}: '${path}' is not a field of the OpenAPI JobSpec`);
  }
}

for (const p of problems) console.log("FAIL " + p);
console.log(`${fields.size} JobSpec fields in the OpenAPI document, ${rows.size} documented, ` +
            `${problems.length} problem(s)`);
process.exit(problems.length === 0 ? 0 : 1);
