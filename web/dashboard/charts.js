// Time-series charts through Chart.js (the global `Chart`, served at /ui/vendor/). The x axis is
// linear in unix seconds with clock labels (no date adapter needed). Charts update in place, with
// no animation, so a poll every few seconds neither flickers nor loses what the legend hid.
import { clock, dateTime, alpha } from './ui.js';

const FONT = { family: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif', size: 11 };

// Points are drawn only while a series has too few of them to show as a line.
const fewPoints = (c) => (c.dataset && c.dataset.data && c.dataset.data.length < 3 ? 2.5 : 0);

export function timeChart(canvas, { stacked = false, yTitle = '', type = 'line', legend = true,
  yFormat = null, suggestedMax = undefined } = {}) {
  Chart.defaults.font = FONT;
  Chart.defaults.color = '#5b6472';
  return new Chart(canvas, {
    type,
    data: { datasets: [] },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: true,
      normalized: true,
      interaction: { mode: 'index', intersect: false },
      // Straight segments unless a series says otherwise: a spline between two samples draws
      // values no sample had (see series()).
      elements: { point: { radius: fewPoints, hitRadius: 6, hoverRadius: 3 }, line: { borderWidth: 1.5, tension: 0 } },
      scales: {
        x: {
          type: 'linear',
          grid: { color: '#eef0f3' },
          ticks: { maxRotation: 0, autoSkipPadding: 24, callback(v) { return timeLabel(v, this.max - this.min); } },
          // Only round times: not the range's own ends.
          afterBuildTicks(axis) {
            const step = axis.chart.$tickStep;
            if (!step) return;
            const ticks = [];
            for (let v = Math.ceil(axis.min / step) * step; v <= axis.max; v += step) ticks.push({ value: v });
            axis.ticks = ticks;
          },
        },
        y: {
          stacked,
          beginAtZero: true,
          suggestedMax,
          grid: { color: '#eef0f3' },
          title: { display: !!yTitle, text: yTitle },
          ticks: yFormat ? { callback: yFormat } : {},
        },
      },
      plugins: {
        legend: { display: legend, position: 'bottom', labels: { boxWidth: 10, boxHeight: 10, padding: 10 } },
        tooltip: {
          callbacks: {
            title: (items) => (items.length
              ? (items[0].chart.scales.x.max - items[0].chart.scales.x.min > 86400 ? dateTime(items[0].parsed.x) : clock(items[0].parsed.x))
              : ''),
          },
        },
      },
    },
  });
}

// Sets the x range and the datasets (matched to the chart's by label, so that a series the
// user hid in the legend stays hidden), then redraws.
// A history shorter than the range is drawn across the whole width, from its first point.
export function setSeries(chart, datasets, xmin, xmax) {
  let first = Infinity;
  for (const d of datasets) if (d.data.length && d.data[0].x < first) first = d.data[0].x;
  if (Number.isFinite(first) && first > xmin) xmin = Math.max(xmin, Math.min(first, xmax - 20));
  chart.options.scales.x.min = xmin;
  chart.$tickStep = niceStep(xmax - xmin, chart.width > 700 ? 10 : 4);
  chart.options.scales.x.max = xmax;
  keepDatasets(chart, datasets);
  chart.update('none');
}

// A tick's label: the clock (with seconds under a quarter of an hour), or over two days the
// date with the clock.
function timeLabel(v, span) {
  if (span <= 2 * 86400) return clock(v, span < 900);
  const d = new Date(v * 1000);
  return `${d.getMonth() + 1}/${d.getDate()} ${clock(v, false)}`;
}

// The round tick interval (seconds) that puts at most `most` ticks on a span.
const STEPS = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  2 * 86400, 4 * 86400, 7 * 86400];
function niceStep(span, most) {
  for (const s of STEPS) if (span / s <= most) return s;
  return STEPS[STEPS.length - 1];
}

// A line series; `area` fills it (stacked areas fill to the series below).
// Drawn as steps, since what the dashboard charts changes in steps (jobs, GPUs held, shares, the
// count of an interval) and a curve between two samples would show values that never were.
// A point's value holds from it until the next point (a gauge as sampled, a count of the minute
// that starts at it); with `interval`, it is the value of the interval that ends at the point
// (a count or a rate over a sample's interval). Chart.js names these the other way round: its
// 'before' draws the step at the next point, its 'after' at the previous one. `smooth` only for
// a measure that does vary continuously (none so far).
export function series(label, color, points, { area = false, dashed = false, stackFill = null,
  interval = false, smooth = false } = {}) {
  return {
    label,
    data: points,
    borderColor: color,
    backgroundColor: area ? alpha(color, 0.55) : color,
    fill: stackFill !== null ? stackFill : area ? 'origin' : false,
    borderDash: dashed ? [5, 4] : undefined,
    stepped: smooth ? false : interval ? 'after' : 'before',
    cubicInterpolationMode: smooth ? 'monotone' : 'default',
    spanGaps: false,
  };
}

export function destroyAll(charts) {
  for (const c of charts) if (c) c.destroy();
}

// A bar chart over named categories (the usage page's rows), stacked when asked: the same fonts,
// no animation and in-place updates as timeChart, so a poll does not redraw from zero.
export function barChart(canvas, { stacked = false, yTitle = '', legend = true, yFormat = null } = {}) {
  Chart.defaults.font = FONT;
  Chart.defaults.color = '#5b6472';
  return new Chart(canvas, {
    type: 'bar',
    data: { labels: [], datasets: [] },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      scales: {
        x: { stacked, grid: { display: false }, ticks: { maxRotation: 30, autoSkip: false } },
        y: {
          stacked,
          beginAtZero: true,
          grid: { color: '#eef0f3' },
          title: { display: !!yTitle, text: yTitle },
          ticks: yFormat ? { callback: yFormat } : {},
        },
      },
      plugins: {
        legend: { display: legend, position: 'bottom', labels: { boxWidth: 10, boxHeight: 10, padding: 10 } },
        tooltip: yFormat ? { callbacks: { label: (c) => `${c.dataset.label}: ${yFormat(c.parsed.y)}` } } : {},
      },
    },
  });
}

// Sets a bar chart's categories and datasets (matched by label, as setSeries does, so that a
// series hidden in the legend stays hidden), then redraws.
export function setBars(chart, labels, datasets) {
  chart.data.labels = labels;
  keepDatasets(chart, datasets);
  chart.update('none');
}

// The chart's datasets replaced by `datasets`, each one of the same label updated in place, so
// that what the legend hid stays hidden.
function keepDatasets(chart, datasets) {
  const old = new Map(chart.data.datasets.map((d) => [d.label, d]));
  chart.data.datasets = datasets.map((d) => {
    const o = old.get(d.label);
    if (!o) return d;
    Object.assign(o, d);
    return o;
  });
}
