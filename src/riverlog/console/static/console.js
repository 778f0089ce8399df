// Riverlog console: live graphs. Every <canvas data-series="URL"> is a Chart.js line chart of
// the JSON {"points": [[ms, value], ...], "error": ""} at URL, fetched again every
// data-refresh seconds; a failed sample's error is shown in the element data-error names.
(function () {
  "use strict";
  function label(ms) {
    return new Date(ms).toLocaleTimeString([], { hour12: false });
  }
  function draw(canvas) {
    var chart = new Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [{ label: canvas.dataset.label, data: [], tension: 0.2,
                                        pointRadius: 2, fill: true }] },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 scales: { y: { beginAtZero: true } } },
    });
    var errorBox = canvas.dataset.error ? document.getElementById(canvas.dataset.error) : null;
    function refresh() {
      if (!document.body.contains(canvas)) { return; }
      fetch(canvas.dataset.series, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (body) {
          chart.data.labels = body.points.map(function (p) { return label(p[0]); });
          chart.data.datasets[0].data = body.points.map(function (p) { return p[1]; });
          chart.update();
          canvas.dataset.points = String(body.points.length);
          if (errorBox) { errorBox.textContent = body.error || ""; }
        })
        .catch(function () {})
        .finally(function () {
          setTimeout(refresh, 1000 * Number(canvas.dataset.refresh || 5));
        });
    }
    refresh();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("canvas[data-series]").forEach(draw);
  });
})();
