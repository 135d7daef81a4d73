// The code editor: CodeMirror 6 (bundled from npm at build time by web/build.mjs), with
// JavaScript highlighting, line numbers, and lint diagnostics for the line a trace error
// points to. Tab is left to move focus (keyboard users are not trapped); indenting is
// Ctrl-] / Ctrl-[ (CodeMirror's defaults).
import { EditorState, Compartment } from "@codemirror/state";
import {
  EditorView,
  keymap,
  lineNumbers,
  highlightActiveLine,
  highlightActiveLineGutter,
  drawSelection,
  highlightSpecialChars,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { syntaxHighlighting, defaultHighlightStyle, bracketMatching, indentOnInput } from "@codemirror/language";
import { javascript } from "@codemirror/lang-javascript";
import { python } from "@codemirror/lang-python";
import { Language } from "./engine/protocol.js";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
import { setDiagnostics, lintGutter } from "@codemirror/lint";

const theme = EditorView.theme({
  "&": { height: "100%", fontSize: "13px", backgroundColor: "var(--editor-bg)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  ".cm-gutters": { backgroundColor: "var(--editor-gutter)", borderRight: "1px solid var(--line)", color: "var(--muted)" },
  ".cm-activeLine": { backgroundColor: "rgba(120, 140, 255, 0.06)" },
  ".cm-activeLineGutter": { backgroundColor: "rgba(120, 140, 255, 0.10)" },
  "&.cm-focused": { outline: "2px solid var(--focus)", outlineOffset: "-2px" },
});

const LANGUAGES = {
  [Language.JAVASCRIPT]: { support: () => javascript(), label: "Model code (JavaScript)" },
  [Language.PYTHON]: { support: () => python(), label: "Model code (Python)" },
};

const languageOf = (name) => {
  const l = LANGUAGES[name] ?? LANGUAGES[Language.JAVASCRIPT];
  return [l.support(), EditorView.contentAttributes.of({ "aria-label": l.label })];
};

/**
 * Creates the editor in `parent` with `doc` in `language` ("javascript" or "python");
 * `onChange(text)` after every edit. Returns { view, getText, setText, setLanguage, showError, clearErrors }.
 */
export function createEditor(parent, doc, onChange, language = Language.JAVASCRIPT) {
  const lang = new Compartment();
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(),
        highlightActiveLineGutter(),
        highlightSpecialChars(),
        history(),
        drawSelection(),
        indentOnInput(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        bracketMatching(),
        closeBrackets(),
        highlightActiveLine(),
        highlightSelectionMatches(),
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap]),
        lang.of(languageOf(language)),
        EditorView.lineWrapping,
        lintGutter(),
        theme,
        EditorView.updateListener.of((u) => {
          if (u.docChanged) onChange(u.state.doc.toString());
        }),
      ],
    }),
  });

  const getText = () => view.state.doc.toString();

  /** Highlights (and labels) the text as `name`'s code. */
  function setLanguage(name) {
    view.dispatch({ effects: lang.reconfigure(languageOf(name)) });
  }

  /** Replaces the whole text (a preset was chosen). */
  function setText(text) {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
  }

  /** The range a diagnostic covers: the word at `column` (1-based), else the whole line. */
  function range(line, column) {
    const doc = view.state.doc;
    const l = doc.line(Math.min(Math.max(1, line | 0), doc.lines));
    if (column && column > 0) {
      const from = Math.min(l.from + column - 1, l.to);
      const word = /^[\w$]+/.exec(doc.sliceString(from, l.to));
      const to = word ? from + word[0].length : Math.min(from + 1, l.to);
      if (to > from) return { from, to };
    }
    return { from: l.from, to: l.to };
  }

  let marked = false;

  /** Shows `items` ({ line, column?, message, severity: "error" | "warning" }) as diagnostics. */
  function showDiagnostics(items) {
    if (!items.length) return clearErrors();
    const list = items.map((d) => ({ ...range(d.line, d.column), severity: d.severity ?? "error", message: d.message, source: "engine" }));
    view.dispatch(setDiagnostics(view.state, list));
    marked = true;
  }

  /** Marks `line` (1-based; column optional) with an error diagnostic. */
  function showError(line, column, message) {
    showDiagnostics([{ line, column, message, severity: "error" }]);
  }

  function clearErrors() {
    // Only when something is marked: a dispatch costs the editor a measure (layout) pass.
    if (!marked) return;
    marked = false;
    view.dispatch(setDiagnostics(view.state, []));
  }

  return { view, getText, setText, setLanguage, showError, showDiagnostics, clearErrors };
}
