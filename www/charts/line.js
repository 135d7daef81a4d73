// A line chart of values per epoch (uPlot, on a canvas): its title and key above, no cursor
// and no live legend, so each update is one canvas redraw and no DOM reads. The Training
// view's loss and accuracy charts; `series` is [[label, stroke colour], …], and the chart's
// data is set with uPlot's setData([epochs, ...values per series]).
import uPlot from "uplot";

export function lineChart(root, title, series, yLabel) {
  // No cursor and no live legend: each update is one canvas redraw, no DOM reads.
  const opts = {
    width: 420,
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "epoch", size: 40, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, { label: yLabel, size: 56 }],
    legend: { show: false },
    cursor: { show: false },
    series: [{ label: "epoch" }, ...series.map(([label, stroke]) => ({ label, stroke, width: 2, points: { show: false }, spanGaps: true }))],
  };
  const span = (cls, text) => Object.assign(document.createElement("span"), { className: cls, textContent: text });
  const head = Object.assign(document.createElement("div"), { className: "chart-head" });
  head.append(span("chart-title", title));
  for (const [label, stroke] of series) {
    const key = span("chart-key", label);
    key.style.setProperty("--c", stroke);
    head.append(key);
  }
  root.append(head);
  return new uPlot(opts, [[], ...series.map(() => [])], root);
}
