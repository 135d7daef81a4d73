// Places the Graph view's drawn graph (views/graph/model.js `visibleGraph`) with dagre, top to
// bottom, one scope at a time: each expanded scope's contents
// (its ops, collapsed scopes and expanded scopes, these already laid out, as boxes) are laid
// out on their own, inside a frame; the top level last. A scope with edges from outside has
// an entry port at the top of its frame, one with edges to outside an exit port at its foot:
// an edge between two nodes in different scopes is drawn as one segment per level it crosses,
// through the ports. Each layout is small (the children of one scope), so expanding a scope
// in a model of tens of thousands of ops costs what its own contents cost.
//
// A node that feeds more than FANOUT nodes of one level has those edges drawn as stubs (not
// laid out), so a tensor read by a thousand ops does not stretch a thousand edges across it.
import dagre from "@dagrejs/dagre";

/** Box sizes (px) of an op and of a collapsed scope. */
export const SIZE = { op: { width: 176, height: 40 }, group: { width: 196, height: 52 } };
/** Past this many distinct targets in one level, a node's edges there are drawn as stubs. */
export const FANOUT = 6;
/** Height of a frame's title bar, above its contents. */
export const HEADER = 24;
/** The narrowest frame (its title and button must fit). */
const MIN_FRAME = 150;
/** Past this many children, a level is ranked by longest path (fast) instead of network simplex. */
const FAST_RANKER = 300;

const inPort = (id) => `${id}>in`;
const outPort = (id) => `${id}>out`;

/**
 * Returns { width, height, nodes: Map id → box, clusters: Map id → box (the frames),
 * ports: Map port id → { x, y }, edges: [segment] }, boxes { x, y, width, height } from their
 * top-left corner. A segment is { from, to, count, sources, points | null (a stub) }: `from`
 * and `to` are drawn nodes, frames or ports (`g:scope>in`, `g:scope>out`); `count` the op
 * edges it carries; `sources` the op indices they start at. `cache` (a Map kept between calls
 * for one model) holds each level's layout: expanding a scope lays out only it and the
 * levels around it again.
 */
export function layoutGraph(vis, cache = new Map()) {
  const parentOf = new Map();
  const children = new Map([["", []]]);
  for (const c of vis.clusters) {
    parentOf.set(c.id, c.parent ?? "");
    children.set(c.id, []);
  }
  for (const c of vis.clusters) children.get(c.parent ?? "").push(c.id);
  for (const it of vis.items) {
    parentOf.set(it.id, it.parent ?? "");
    children.get(it.parent ?? "").push(it.id);
  }
  const isCluster = (id) => children.has(id) && id !== "";

  // Each drawn edge as segments, one per level it crosses, summed per level and pair.
  const segments = new Map([...children.keys()].map((k) => [k, new Map()]));
  const add = (level, from, to, e, sources) => {
    const key = `${from}\u0000${to}`;
    const m = segments.get(level);
    const s = m.get(key);
    if (s) {
      s.count += e.count;
      for (const i of sources) s.sources.add(i);
    } else m.set(key, { from, to, count: e.count, sources: new Set(sources) });
  };
  const chain = (id) => {
    const out = [];
    for (let p = parentOf.get(id); p !== undefined; p = p === "" ? undefined : parentOf.get(p)) out.push(p);
    return out; // containers from the innermost to the top level ("")
  };
  for (const e of vis.edges) {
    const up = chain(e.from);
    const down = chain(e.to);
    const common = up.find((c) => down.includes(c));
    // Up from the source to the common level, through each frame's exit.
    let a = e.from;
    for (const c of up) {
      if (c === common) break;
      add(c, a, outPort(c), e, e.sources);
      a = c;
    }
    let b = e.to;
    for (const c of down) {
      if (c === common) break;
      add(c, inPort(c), b, e, e.sources);
      b = c;
    }
    add(common, a, b, e, e.sources);
  }

  // Lay out the levels, innermost first (a frame's size is its contents').
  const depth = (id) => (id === "" ? 0 : chain(id).length);
  const levels = [...children.keys()].sort((x, y) => depth(y) - depth(x));
  const local = new Map(); // level → { width, height, pos: Map child/port → box, segs }
  const kindOf = new Map(vis.items.map((it) => [it.id, it.kind]));
  const sizeOf = (id) => {
    if (!isCluster(id)) return SIZE[kindOf.get(id)];
    const l = local.get(id);
    return { width: Math.max(l.width, MIN_FRAME), height: l.height + HEADER };
  };
  for (const level of levels) {
    const kids = children.get(level);
    const segs = [...segments.get(level).values()];
    const segKey = (s) => `${s.from}\u0000${s.to}`;
    // A level is laid out again only when its contents, their sizes or its edges changed.
    const key = `${level}|${kids.map((id) => `${id}:${sizeOf(id).width}x${sizeOf(id).height}`).join()}|${segs.map((s) => `${segKey(s)}:${s.count}`).join()}`;
    let done = cache.get(key);
    if (!done) {
      done = layoutLevel(level, kids, segs, sizeOf);
      cache.set(key, done);
    }
    for (const s of segs) s.local = done.points.get(segKey(s)) ?? null;
    local.set(level, { width: done.width, height: done.height, pos: done.pos, segs });
  }

  // Place the levels, the top level first, and the segments with their ends at the ports.
  const nodes = new Map();
  const clusters = new Map();
  const ports = new Map();
  const edges = [];
  const place = (level, ox, oy) => {
    const l = local.get(level);
    for (const id of children.get(level)) {
      const p = l.pos.get(id);
      const box = { x: ox + p.x, y: oy + p.y, width: p.width, height: p.height };
      if (isCluster(id)) {
        clusters.set(id, box);
        // Contents centred in a frame wider than they are.
        const inner = local.get(id);
        place(id, box.x + (box.width - inner.width) / 2, box.y + HEADER);
      } else nodes.set(id, box);
    }
  };
  place("", 0, 0);
  // The segments, the top level first: a frame's ports sit on its border where the edges of
  // the level around it meet it (at the mean of their ends), and the segments inside start
  // or end there.
  const origin = (level) => (level === "" ? { x: 0, y: 0 } : { x: clusters.get(level).x + (clusters.get(level).width - local.get(level).width) / 2, y: clusters.get(level).y + HEADER });
  const mean = (xs) => xs.reduce((a, x) => a + x, 0) / xs.length;
  for (const level of [...levels].reverse()) {
    const o = origin(level);
    const l = local.get(level);
    const drawn = l.segs.map((s) => ({ s, points: s.local ? s.local.map((p) => ({ x: p.x + o.x, y: p.y + o.y })) : null }));
    for (const id of children.get(level)) {
      if (!isCluster(id)) continue;
      const frame = clusters.get(id);
      const inner = origin(id);
      const own = local.get(id).pos;
      const enter = drawn.filter((d) => d.points && d.s.to === id).map((d) => d.points[d.points.length - 1].x);
      const leave = drawn.filter((d) => d.points && d.s.from === id).map((d) => d.points[0].x);
      const at = (port, xs, y) => {
        const p = own.get(port);
        if (p) ports.set(port, { x: xs.length ? mean(xs) : inner.x + p.x + p.width / 2, y });
      };
      at(inPort(id), enter, frame.y);
      at(outPort(id), leave, frame.y + frame.height);
    }
    for (const { s, points } of drawn) {
      if (points) {
        // Ends at a frame: at its port (an expanded child's, or this level's own).
        const start = isCluster(s.from) ? ports.get(outPort(s.from)) : ports.get(s.from);
        const end = isCluster(s.to) ? ports.get(inPort(s.to)) : ports.get(s.to);
        if (start) points[0] = { ...start };
        if (end) points[points.length - 1] = { ...end };
      }
      edges.push({ from: s.from, to: s.to, count: s.count, sources: [...s.sources], points });
    }
  }
  const root = local.get("");
  return { width: root.width, height: root.height, nodes, clusters, ports, edges };
}

/** One level's layout: its children and ports placed by dagre, its segments' points (null: a stub). */
function layoutLevel(level, kids, segs, sizeOf) {
  const top = level === "";
  // Fan-out: a node (or the entry port) feeding more than FANOUT nodes here.
  const targets = new Map();
  for (const s of segs) targets.set(s.from, (targets.get(s.from) ?? 0) + 1);
  const stub = (s) => targets.get(s.from) > FANOUT;
  const g = new dagre.graphlib.Graph();
  g.setGraph({
    rankdir: "TB",
    // One of Brandes–Köpf's four alignments, not their balance: the balance lets a long chain
    // with a node beside each op (a constant it reads) drift sideways by a node a step.
    align: "UL",
    nodesep: 20,
    ranksep: 36,
    edgesep: 10,
    marginx: top ? 20 : 12,
    marginy: top ? 20 : 8,
    ranker: kids.length > FAST_RANKER ? "longest-path" : "network-simplex",
  });
  g.setDefaultEdgeLabel(() => ({}));
  for (const id of kids) g.setNode(id, { ...sizeOf(id) });
  const hasIn = segs.some((s) => s.from === inPort(level));
  const hasOut = segs.some((s) => s.to === outPort(level));
  if (hasIn) g.setNode(inPort(level), { width: 1, height: 1 });
  if (hasOut) g.setNode(outPort(level), { width: 1, height: 1 });
  // (The ports are ranked next to what they feed or take from, no further: edges pinning them
  // to the first and last ranks would run long past every op without inputs, such as a
  // constant made deep inside, and long edges are what makes dagre slow. The drawing puts
  // them on the frame.)
  for (const s of segs) if (!stub(s)) g.setEdge(s.from, s.to, { weight: Math.min(s.count, 8) });
  dagre.layout(g);
  const pos = new Map();
  for (const id of g.nodes()) {
    const n = g.node(id);
    pos.set(id, { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height });
  }
  const points = new Map(segs.map((s) => [`${s.from}\u0000${s.to}`, stub(s) ? null : g.edge(s.from, s.to).points]));
  const { width, height } = g.graph();
  return { width, height, pos, points };
}
