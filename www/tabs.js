// The view tabs: one tab and one panel per view, as ARIA tabs (arrow keys, Home and End move
// between them; only the selected tab is in the tab order). Selecting one asks `onSelect(id)`;
// the page shows it with `show(id)` when its state says so.
export function createTabs({ tabList, panelBox, views, titles, onSelect }) {
  const panels = {};
  const tabs = {};
  let selected = views[0];
  for (const id of views) {
    const tab = document.createElement("button");
    Object.assign(tab, { type: "button", id: `tab-${id}`, textContent: titles[id] });
    tab.setAttribute("role", "tab");
    tab.setAttribute("aria-controls", `view-${id}`);
    tabList.append(tab);
    const panel = document.createElement("div");
    panel.id = `view-${id}`;
    panel.className = `view view-${id}`;
    panel.setAttribute("role", "tabpanel");
    panel.setAttribute("aria-labelledby", tab.id);
    panel.tabIndex = 0;
    panelBox.append(panel);
    tabs[id] = tab;
    panels[id] = panel;
    tab.addEventListener("click", () => onSelect(id));
  }
  tabList.addEventListener("keydown", (e) => {
    const i = views.indexOf(selected);
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: views.length - 1 }[e.key];
    if (next === undefined) return;
    e.preventDefault();
    const id = views[(next + views.length) % views.length];
    onSelect(id);
    tabs[id].focus();
  });

  /** Shows view `id`'s panel and marks its tab selected. */
  function show(id) {
    selected = id;
    for (const v of views) {
      const on = v === id;
      tabs[v].setAttribute("aria-selected", String(on));
      tabs[v].tabIndex = on ? 0 : -1;
      panels[v].hidden = !on;
    }
  }
  return { panels, tabs, show };
}
