// What the page holds: the preset, the editor's text, the options (the planner's Options
// JSON), the IPUs in the system and the float16 switch (passed to the code as `ipus` and
// `half`), the open view and the training settings. Saved to
// localStorage and to the URL hash (#z=<deflate-raw, base64url JSON>) on every change, so a
// reload keeps the edit and the address is a link that restores it all.
import { defaultOptions, mergeOptions } from "./options.js";
import { PRESETS, DEFAULT_PRESET, presetById } from "./presets/index.js";
import { Language } from "./engine/protocol.js";

export const STORAGE_KEY = "ipu-playground.state";
export const VIEWS = Object.freeze(["graph", "assignment", "memory", "execution", "fit", "training"]);
export const DATASET_NAMES = Object.freeze(["PubMed", "Cora", "CiteSeer"]);
/** The editor's languages (engine/protocol.js Language's values). */
export const LANGUAGES = Object.freeze(Object.values(Language));
// 2: options became the planner's Options JSON (version 1 held the page's own draft of it,
// whose options are not carried over).
const VERSION = 2;

/** A preset's code in `language` (each preset has both). */
export function presetCode(p, language) {
  return language === Language.PYTHON ? p.python : p.code;
}

/** The state a preset starts from (in the language of `base`, JavaScript by default). */
export function presetState(id, base = {}) {
  const p = presetById(id) ?? presetById(DEFAULT_PRESET);
  const language = LANGUAGES.includes(base.language) ? base.language : Language.JAVASCRIPT;
  return {
    v: VERSION,
    preset: p.id,
    language,
    code: presetCode(p, language),
    // The other language's text, kept across a switch of language (null: the preset's).
    other: null,
    options: mergeOptions(defaultOptions(), p.options),
    ipus: p.ipus,
    half: Boolean(p.half),
    view: base.view ?? "graph",
    colorBy: base.colorBy ?? "ipu",
    train: { dataset: "PubMed", epochs: 200, ...(base.train ?? {}) },
  };
}

/** Keeps what is well-formed in `raw`, defaults for the rest. */
export function sanitize(raw) {
  const base = presetState(presetById(raw?.preset) ? raw.preset : DEFAULT_PRESET, { language: raw?.language });
  if (!raw || typeof raw !== "object") return base;
  const s = { ...base };
  if (typeof raw.code === "string" && raw.code.length <= 200_000) s.code = raw.code;
  if (typeof raw.other === "string" && raw.other.length <= 200_000) s.other = raw.other;
  if (raw.v === VERSION) {
    if (raw.options && typeof raw.options === "object" && !Array.isArray(raw.options)) s.options = mergeOptions(defaultOptions(), raw.options);
    if (Number.isInteger(raw.ipus) && raw.ipus >= 1 && raw.ipus <= 1024) s.ipus = raw.ipus;
    if (typeof raw.half === "boolean") s.half = raw.half;
  }
  if (VIEWS.includes(raw.view)) s.view = raw.view;
  if (["ipu", "stage", "phase"].includes(raw.colorBy)) s.colorBy = raw.colorBy;
  if (raw.train && typeof raw.train === "object") {
    if (DATASET_NAMES.includes(raw.train.dataset)) s.train.dataset = raw.train.dataset;
    if (Number.isInteger(raw.train.epochs) && raw.train.epochs >= 1 && raw.train.epochs <= 10000) s.train.epochs = raw.train.epochs;
  }
  return s;
}

// ---------------------------------------------------------------- encoding for links

async function pipe(bytes, stream) {
  const out = new Response(new Blob([bytes]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

function toBase64Url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

export async function encode(state) {
  const json = new TextEncoder().encode(JSON.stringify(state));
  return toBase64Url(await pipe(json, new CompressionStream("deflate-raw")));
}

export async function decode(text) {
  const json = await pipe(fromBase64Url(text), new DecompressionStream("deflate-raw"));
  return JSON.parse(new TextDecoder().decode(json));
}

// ---------------------------------------------------------------- the store

export class Store {
  constructor() {
    this.state = presetState(DEFAULT_PRESET);
    this.listeners = new Set();
    this.saveTimer = 0;
    this.source = "defaults";
  }

  /** Loads the link's state (#z=…), else the saved one, else the default preset. */
  async load() {
    const m = /[#&]z=([A-Za-z0-9_-]+)/.exec(location.hash);
    if (m) {
      try {
        this.state = sanitize(await decode(m[1]));
        this.source = "link";
        this.saveNow();
        return this.state;
      } catch {
        this.source = "bad-link";
      }
    }
    try {
      const saved = localStorage.getItem(STORAGE_KEY);
      if (saved) {
        this.state = sanitize(JSON.parse(saved));
        if (this.source !== "bad-link") this.source = "saved";
      }
    } catch {
      // storage unavailable or unreadable: start from the defaults
    }
    return this.state;
  }

  get() {
    return this.state;
  }

  /** Applies `patch` (a partial state), tells the listeners what changed, saves soon. */
  set(patch, { save = true } = {}) {
    this.state = { ...this.state, ...patch };
    for (const fn of this.listeners) fn(this.state, patch);
    if (save) this.scheduleSave();
  }

  /** Calls `fn` when the address gets a hash this page did not write (a link pasted into it). */
  onForeignHash(fn) {
    addEventListener("hashchange", () => {
      if (location.hash !== this.written) fn();
    });
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  scheduleSave() {
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(() => this.saveNow(), 250);
  }

  /** Writes localStorage and the URL hash now; resolves with the link. */
  async saveNow() {
    clearTimeout(this.saveTimer);
    const snapshot = this.state;
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(snapshot));
    } catch {
      // full or disabled: the link below still carries the state
    }
    const z = await encode(snapshot);
    if (snapshot !== this.state) return this.link();
    const url = new URL(location.href);
    url.hash = `z=${z}`;
    history.replaceState(null, "", url);
    this.written = url.hash;
    return url.href;
  }

  async link() {
    return this.saveNow();
  }
}

/**
 * The patch that switches the editor to `language`: its text becomes the code kept for that
 * language (or the preset's), the current text is kept as the other; everything else (the
 * options, the IPUs, the view, training) stays.
 */
export function switchLanguage(state, language) {
  if (!LANGUAGES.includes(language) || language === state.language) return null;
  const p = presetById(state.preset) ?? presetById(DEFAULT_PRESET);
  return { language, code: state.other ?? presetCode(p, language), other: state.code };
}

export { PRESETS };
