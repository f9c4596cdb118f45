// Writes zod.json: z.toJSONSchema() output for typical app types, each with an example instance
// that the Zod type itself parses (so it is valid). Zod is not a dependency of this repo: run it
// where zod@4.6.7 is installed, e.g.
//   tmp=$(mktemp -d) && (cd "$tmp" && npm install --no-audit --no-fund zod@4.6.7 &&
//     node "$OLDPWD/tools/benchmarks/data/schemas/zod/generate.cjs" "$OLDPWD/tools/benchmarks/data/schemas/zod/zod.json")
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const requireHere = createRequire(path.join(process.cwd(), "noop.js"));
const { z } = requireHere("zod");
const zodVersion = requireHere("zod/package.json").version;

const Address = z.object({
  street: z.string().min(1),
  city: z.string(),
  postalCode: z.string().regex(/^[0-9]{5}(-[0-9]{4})?$/),
  country: z.enum(["US", "CA", "MX"]),
});

const Category = z.object({
  name: z.string(),
  get subcategories() {
    return z.array(Category);
  },
});

const TreeNode = z.object({
  id: z.number().int(),
  label: z.string(),
  get children() {
    return z.array(TreeNode).optional();
  },
});

const Comment = z.object({
  author: z.string(),
  body: z.string().max(500),
  get replies() {
    return z.array(Comment);
  },
});

const Json = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(Json), z.record(z.string(), Json)]),
);

const Shape = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("circle"), radius: z.number().positive() }),
  z.object({ kind: z.literal("rect"), width: z.number(), height: z.number() }),
  z.object({ kind: z.literal("polygon"), points: z.array(z.tuple([z.number(), z.number()])).min(3) }),
]);

const types = {
  user_profile: [
    z.object({
      id: z.uuid(),
      name: z.string().min(1).max(80),
      email: z.email(),
      age: z.number().int().min(13).max(130).optional(),
      bio: z.string().nullable(),
      role: z.enum(["admin", "editor", "viewer"]),
    }),
    { id: "3f1c2a9e-8b7d-4c6e-9a1b-2d3e4f5a6b7c", name: "Ada", email: "ada@example.com", bio: null, role: "admin" },
  ],
  address_book: [
    z.object({ owner: z.string(), addresses: z.array(Address).max(5) }),
    { owner: "Sam", addresses: [{ street: "1 Main St", city: "Springfield", postalCode: "12345", country: "US" }] },
  ],
  todo_list: [
    z.object({
      title: z.string(),
      items: z.array(
        z.object({
          text: z.string(),
          done: z.boolean().default(false),
          due: z.iso.date().optional(),
          priority: z.union([z.literal(1), z.literal(2), z.literal(3)]),
        }),
      ),
    }),
    { title: "Chores", items: [{ text: "Laundry", done: false, due: "2025-03-01", priority: 2 }] },
  ],
  category_tree: [Category, { name: "root", subcategories: [{ name: "leaf", subcategories: [] }] }],
  tree_node: [TreeNode, { id: 1, label: "a", children: [{ id: 2, label: "b" }] }],
  comment_thread: [Comment, { author: "x", body: "hi", replies: [{ author: "y", body: "yo", replies: [] }] }],
  json_value: [Json, { a: [1, "two", null, { b: true }] }],
  shape: [Shape, { kind: "rect", width: 2, height: 3 }],
  event: [
    z.object({
      type: z.literal("page_view"),
      timestamp: z.iso.datetime(),
      url: z.url(),
      referrer: z.string().nullable().optional(),
      properties: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    }),
    { type: "page_view", timestamp: "2025-01-02T03:04:05Z", url: "https://example.com/a", properties: { ab: "b", n: 3 } },
  ],
  order: [
    z.object({
      orderId: z.string().regex(/^ORD-[0-9]{6}$/),
      customer: z.object({ name: z.string(), phone: z.string().regex(/^\+?[0-9 ()-]{7,20}$/).optional() }),
      lines: z.array(z.object({ sku: z.string(), qty: z.number().int().positive(), price: z.number().nonnegative() })).min(1),
      status: z.enum(["pending", "paid", "shipped", "cancelled"]),
      coupon: z.string().nullable(),
      notes: z.string().optional(),
    }),
    { orderId: "ORD-000123", customer: { name: "Lee" }, lines: [{ sku: "A1", qty: 2, price: 9.5 }], status: "paid", coupon: null },
  ],
  settings: [
    z.object({
      theme: z.enum(["light", "dark", "system"]),
      fontSize: z.number().min(8).max(48),
      notifications: z.object({ email: z.boolean(), push: z.boolean(), digest: z.enum(["daily", "weekly"]).nullable() }).partial(),
      shortcuts: z.record(z.string(), z.string()),
    }),
    { theme: "dark", fontSize: 14, notifications: { email: true }, shortcuts: { save: "ctrl+s" } },
  ],
  api_result: [
    z.union([
      z.object({ ok: z.literal(true), data: z.object({ items: z.array(z.string()), next: z.string().nullable() }) }),
      z.object({ ok: z.literal(false), error: z.object({ code: z.number().int(), message: z.string() }) }),
    ]),
    { ok: false, error: { code: 404, message: "not found" } },
  ],
  recipe: [
    z.object({
      name: z.string(),
      servings: z.number().int().min(1),
      ingredients: z.array(z.object({ item: z.string(), amount: z.string(), optional: z.boolean().optional() })),
      steps: z.array(z.string()).min(1),
      tags: z.array(z.enum(["vegan", "vegetarian", "gluten-free", "quick"])).optional(),
      nutrition: z.object({ calories: z.number(), protein_g: z.number() }).nullable(),
    }),
    { name: "Toast", servings: 1, ingredients: [{ item: "bread", amount: "1 slice" }], steps: ["toast it"], nutrition: null },
  ],
  calendar_event: [
    z.object({
      title: z.string().max(120),
      start: z.iso.datetime({ offset: true }),
      end: z.iso.datetime({ offset: true }),
      allDay: z.boolean(),
      attendees: z.array(z.object({ email: z.email(), optional: z.boolean() })),
      recurrence: z.union([z.literal("none"), z.object({ freq: z.enum(["daily", "weekly", "monthly"]), count: z.number().int().max(365) })]),
    }),
    { title: "Standup", start: "2025-01-02T09:00:00+01:00", end: "2025-01-02T09:15:00+01:00", allDay: false, attendees: [], recurrence: "none" },
  ],
  sentiment: [
    z.object({
      sentiment: z.enum(["positive", "negative", "neutral"]),
      confidence: z.number().min(0).max(1),
      aspects: z.array(z.object({ aspect: z.string(), sentiment: z.enum(["positive", "negative", "neutral"]) })),
    }),
    { sentiment: "positive", confidence: 0.9, aspects: [] },
  ],
  intersection: [
    z.intersection(z.object({ id: z.string() }), z.object({ createdAt: z.iso.datetime() })),
    { id: "a", createdAt: "2025-01-02T03:04:05Z" },
  ],
  tuple_and_set: [
    z.object({ point: z.tuple([z.number(), z.number(), z.number()]), labels: z.array(z.string()).max(3), version: z.string().regex(/^\d+\.\d+\.\d+$/) }),
    { point: [1, 2, 3], labels: ["a"], version: "1.2.3" },
  ],
  nested_recursive: [
    z.object({ tree: TreeNode, thread: z.array(Comment).max(10), billing: Address, shipping: Address.nullable() }),
    { tree: { id: 1, label: "r" }, thread: [], billing: { street: "s", city: "c", postalCode: "12345", country: "CA" }, shipping: null },
  ],
  form_fields: [
    z.array(
      z.discriminatedUnion("type", [
        z.object({ type: z.literal("text"), name: z.string(), maxLength: z.number().int().optional() }),
        z.object({ type: z.literal("select"), name: z.string(), options: z.array(z.string()).min(1) }),
        z.object({ type: z.literal("checkbox"), name: z.string(), checked: z.boolean() }),
      ]),
    ),
    [{ type: "checkbox", name: "agree", checked: true }],
  ],
};

const out = { generator: `zod ${zodVersion} z.toJSONSchema (default options)`, schemas: {} };
for (const [name, [type, example]] of Object.entries(types)) {
  out.schemas[name] = { schema: z.toJSONSchema(type), instances: [type.parse(example)] };
}
fs.writeFileSync(process.argv[2], JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${Object.keys(out.schemas).length} schemas to ${process.argv[2]}`);
