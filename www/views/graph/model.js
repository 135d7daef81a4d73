// The Graph view's grouping model: the traced ops (plan/adapter.js `graphNodes`) as a tree of
// module scopes, and the graph the view draws for a set of expanded scopes. A collapsed scope
// is one node; the edges between two drawn nodes are aggregated into one, with a count. Only
// what is drawn is built here, so a model of tens of thousands of ops opened at its top-level
// modules costs one pass over its ops and edges. No DOM and no layout: views/graph/layout.js
// places what `visibleGraph` returns.

/** Past this many parts (child scopes and own ops), a scope's are split into runs … */
export const MAX_PARTS = 1000;
/** … of this many, each a synthetic scope (`chunk`) drawn like a module's. */
export const CHUNK = 500;

/**
 * The scope tree of `nodes` ({ index, scope, inputs, … } in program order). A group's id is
 * its scope path (`layers.0.attn`); the root's is "". Each group lists its child groups and
 * its own ops in order of first appearance, and counts every op under it (`count`). A scope
 * with more than MAX_PARTS parts (a flat model of 20,000 ops, a ModuleList of 5,000 layers)
 * holds them in runs of CHUNK instead: groups `{ chunk: true, id: "scope#k", label }`.
 * `users` maps an op to the ops that read its output; `home` an op to its innermost group.
 */
export function buildTree(nodes) {
  const root = { id: "", name: "", parent: null, children: [], ops: [], count: 0 };
  const groups = new Map([["", root]]);
  const byIndex = new Map();
  const users = new Map(); // op index → the ops that read it
  const home = new Map(); // op index → its innermost group
  const groupOf = (scope) => {
    let g = groups.get(scope);
    if (g) return g;
    const dot = scope.lastIndexOf(".");
    const parent = groupOf(dot < 0 ? "" : scope.slice(0, dot));
    g = { id: scope, name: dot < 0 ? scope : scope.slice(dot + 1), parent, children: [], ops: [], count: 0 };
    parent.children.push(g);
    groups.set(scope, g);
    return g;
  };
  for (const n of nodes) {
    byIndex.set(n.index, n);
    for (const i of n.inputs) {
      if (!users.has(i)) users.set(i, []);
      users.get(i).push(n.index);
    }
    const g = groupOf(n.scope ?? "");
    g.ops.push(n.index);
    home.set(n.index, g);
    for (let a = g; a; a = a.parent) a.count++;
  }
  for (const g of [...groups.values()]) {
    if (g.ops.length + g.children.length <= MAX_PARTS) continue;
    const parts = partsOf(g);
    const chunks = [];
    for (let k = 0; k * CHUNK < parts.length; k++) {
      const run = parts.slice(k * CHUNK, (k + 1) * CHUNK);
      const id = `${g.id}#${k}`;
      const label = `${g.id || "top level"} [${k * CHUNK + 1}–${k * CHUNK + run.length}]`;
      const c = { id, name: label, label, chunk: true, parent: g, children: [], ops: [], count: 0 };
      for (const p of run) {
        if (p.group) {
          p.group.parent = c;
          c.children.push(p.group);
          c.count += p.group.count;
        } else {
          c.ops.push(p.op);
          home.set(p.op, c);
          c.count++;
        }
      }
      groups.set(id, c);
      chunks.push(c);
    }
    g.children = chunks;
    g.ops = [];
  }
  return { root, groups, byIndex, users, home, nodes };
}

/** A group's child groups and own ops, in program order: [{ at, op } | { at, group }]. */
function partsOf(g) {
  return [...g.ops.map((i) => ({ at: i, op: i })), ...g.children.map((c) => ({ at: firstOp(c), group: c }))].sort((a, b) => a.at - b.at);
}

/** Every op index under `group`, in order. */
export function opsUnder(group) {
  const out = [];
  const walk = (g) => {
    for (const i of g.ops) out.push(i);
    for (const c of g.children) walk(c);
  };
  walk(group);
  return out.sort((a, b) => a - b);
}

/** The one op of a group that holds exactly one. */
function onlyOp(group) {
  let g = group;
  while (!g.ops.length) g = g.children[0];
  return g.ops[0];
}

/**
 * The graph drawn for the expanded scopes `expanded` (a Set of group ids; the root is always
 * open). Returns
 *   items:    [{ id, kind: "op", index, parent, scope } | { id, kind: "group", group, parent }]
 *             (`parent`: the id of the expanded group drawn around it, or null),
 *   clusters: [{ id, group, parent }]  the expanded groups, outer ones first,
 *   edges:    [{ from, to, count, sources }]  one per pair of drawn nodes: `count` op edges,
 *             from the ops `sources`,
 *   owner:    Map op index → the id of the drawn node that holds it.
 * A group of one op is drawn as that op.
 */
export function visibleGraph(tree, expanded) {
  const items = [];
  const clusters = [];
  const owner = new Map();
  const opItem = (index, parent) => {
    const id = `n${index}`;
    items.push({ id, kind: "op", index, parent, scope: tree.byIndex.get(index).scope });
    owner.set(index, id);
  };
  const visit = (g, parent) => {
    // Child groups and own ops interleaved in program order.
    for (const p of partsOf(g)) {
      if (p.op !== undefined) opItem(p.op, parent);
      else if (p.group.count === 1) opItem(onlyOp(p.group), parent);
      else if (expanded.has(p.group.id)) {
        const id = `g:${p.group.id}`;
        clusters.push({ id, group: p.group, parent });
        visit(p.group, id);
      } else {
        const id = `g:${p.group.id}`;
        items.push({ id, kind: "group", group: p.group, parent });
        for (const i of opsUnder(p.group)) owner.set(i, id);
      }
    }
  };
  visit(tree.root, null);
  const pairs = new Map();
  for (const n of tree.nodes) {
    const to = owner.get(n.index);
    for (const input of n.inputs) {
      const from = owner.get(input);
      if (from === undefined || from === to) continue;
      const key = `${from}\u0000${to}`;
      const e = pairs.get(key);
      if (e) {
        e.count++;
        e.sources.add(input);
      } else pairs.set(key, { from, to, count: 1, sources: new Set([input]) });
    }
  }
  const edges = [...pairs.values()].map((e) => ({ ...e, sources: [...e.sources] }));
  return { items, clusters, edges, owner };
}

const firstCache = new WeakMap();
/** The first op index under `group`. */
function firstOp(group) {
  let f = firstCache.get(group);
  if (f === undefined) {
    f = Math.min(group.ops.length ? group.ops[0] : Infinity, ...group.children.map(firstOp));
    firstCache.set(group, f);
  }
  return f;
}

/** The ids of the groups to expand so that op `index` is drawn as itself. */
export function groupsAround(tree, index) {
  const out = [];
  for (let g = tree.home.get(index); g && g.id !== ""; g = g.parent) out.unshift(g.id);
  return out;
}

/**
 * The ops whose name, scope, shape or `%index` contain `query` (case-insensitive), in order,
 * and the groups of more than one op whose path does.
 */
export function search(tree, query) {
  const q = query.trim().toLowerCase();
  if (!q) return { ops: [], groups: [] };
  const exact = /^%\d+$/.test(q) ? Number(q.slice(1)) : null;
  const ops = [];
  for (const n of tree.nodes) {
    if (exact !== null ? n.index === exact : n.op.toLowerCase().includes(q) || n.scope.toLowerCase().includes(q) || n.shape.toLowerCase().includes(q)) ops.push(n.index);
  }
  // (A scope of one op is drawn as the op, found above.)
  const groups = exact !== null ? [] : [...tree.groups.values()].filter((g) => g.id && !g.chunk && g.count > 1 && g.id.toLowerCase().includes(q)).map((g) => g.id);
  return { ops, groups };
}

/**
 * How the ops of a drawn node split over the placement `key` (ipu, stage or phase):
 * [{ value, count }] by value, null (unplaced) last.
 */
export function keyShares(tree, item, key) {
  const counts = new Map();
  const indices = item.kind === "op" ? [item.index] : opsUnder(item.group);
  for (const i of indices) {
    const v = tree.byIndex.get(i).place[key];
    counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return [...counts.entries()].map(([value, count]) => ({ value, count })).sort((a, b) => (a.value ?? Infinity) - (b.value ?? Infinity));
}
