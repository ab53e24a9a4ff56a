"""plots/tests/test_report.py: the run's HTML page (plots/report.py), opened in a real browser.

The page of a run with every figure, a failure, a wrong check and an unverified time is loaded
in Debian's headless chromium with a checker script appended (to a copy; the page itself has no
script): every image must have loaded and be drawn, and no two elements of the page (headings,
paragraphs, tables, figures) may overlap. The page must also hold everything in one file.
    /usr/bin/python3 -m pytest plots/tests/test_report.py
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import plot  # noqa: E402
import report  # noqa: E402
from test_plots import FOUR, TIMES, summary  # noqa: E402

CHROMIUM = shutil.which("chromium")

CHECKER = """<script>
window.addEventListener('load', () => {
  const problems = [];
  for (const img of document.images) {
    const box = img.getBoundingClientRect();
    if (!img.complete || img.naturalWidth === 0 || box.width < 50 || box.height < 50)
      problems.push('image not shown: ' + img.alt);
  }
  const items = [...document.querySelectorAll('h1, h2, p, ul, div.scroll, figure')];
  for (let i = 0; i < items.length; i++) {
    const a = items[i].getBoundingClientRect();
    if (a.width === 0 || a.height === 0) problems.push('not rendered: ' + items[i].tagName);
    for (let j = i + 1; j < items.length; j++) {
      if (items[i].contains(items[j]) || items[j].contains(items[i])) continue;
      const b = items[j].getBoundingClientRect();
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1)
        problems.push('overlap: ' + items[i].tagName + ' ' + items[i].textContent.slice(0, 30) +
                      ' / ' + items[j].tagName + ' ' + items[j].textContent.slice(0, 30));
    }
  }
  const out = document.createElement('pre');
  out.id = 'checked';
  out.textContent = JSON.stringify({images: document.images.length, items: items.length,
                                    problems: problems});
  document.body.appendChild(out);
});
</script>
"""


@pytest.fixture
def run_dir(tmp_path):
    s = summary(TIMES, FOUR)
    s["rows"][1]["backends"]["pytorch"]["verified"] = False
    s["rows"][1]["backends"]["engine"].update(median_interval_seconds=[3e-8, 6e-8], wide=True)
    s["machine"]["environment"] = {"cpu_family": "26", "cpu_model_number": "2",
                                   "cpu_flags": " ".join(f"flag{i}" for i in range(300))}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    (tmp_path / "check.json").write_text(json.dumps({"results": [
        {"instance": "grad/tiny_graph", "backend": "libtorch", "status": "wrong",
         "reference": "engine", "max_rel_diff": 0.5, "tolerance": 1e-9,
         "message": "value differs from engine by 5.0e-01"}]}))
    (tmp_path / "processes.json").write_text(json.dumps({"processes": [
        {"backend": "libtorch", "phase": "bench", "benchmark": "grad/scalar_chain/x",
         "status": "failed", "message": "killed by signal 6", "log": "logs/x.log"}]}))
    assert plot.main(["plot.py", str(tmp_path)]) == 0
    return tmp_path


def test_the_page_holds_everything_in_one_file(run_dir):
    page = (run_dir / "report.html").read_text()
    figures = sorted(os.listdir(run_dir / "plots"))
    assert page.count("src='data:image/png;base64,") == len(figures) >= 5
    assert not re.search(r"""(src|href)=['"](?!data:)""", page), "nothing may load from outside"
    for text in ("grad/tiny_graph", "value differs from engine", "killed by signal 6",
                 "flag299", "30 ns to 60 ns", "wrong"):
        assert text in page, text
    assert "<script" not in page


def browser_check(page, tmp_path, width):
    """What the checker found in the page laid out by headless chromium, `width` pixels wide."""
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", CHECKER + "</body>"))
    r = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},3000",
         "--virtual-time-budget=10000", "--dump-dom", checked.as_uri()],
        capture_output=True, text=True, timeout=120)
    found = re.search(r"<pre id=\"checked\">(.*?)</pre>", r.stdout, re.S)
    assert found, f"the page did not finish loading in chromium: {r.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                                              "(make test installs it)")


@needs_chromium
def test_the_page_renders_in_a_browser_images_load_nothing_overlaps(run_dir, tmp_path):
    page = (run_dir / "report.html").read_text()
    for width in (1400, 800):  # a wide window and a narrow one
        result = browser_check(page, tmp_path, width)
        assert result["images"] == len(os.listdir(run_dir / "plots")), result
        assert result["items"] >= 20 and result["problems"] == [], result


# The checker itself: a page whose figures ride over the text, or whose images are not drawn,
# is caught.
@needs_chromium
def test_the_browser_check_catches_overlaps_and_missing_images(run_dir, tmp_path):
    page = (run_dir / "report.html").read_text()
    broken = browser_check(page.replace("</style>", "figure { margin-top: -300px; }</style>"),
                           tmp_path, 1400)
    assert any(p.startswith("overlap: ") for p in broken["problems"]), broken
    hidden = browser_check(page.replace("</style>", "figure img { display: none; }</style>"),
                           tmp_path, 1400)
    assert any(p.startswith("image not shown: ") for p in hidden["problems"]), hidden


# A processes.json or check.json that cannot be read is said on the page, where its section and
# the banner stand: never "Failures: None" under a banner that counts a failure.
@pytest.mark.parametrize("name", ["processes.json", "check.json"])
def test_an_unreadable_record_is_said_not_dropped(run_dir, name):
    (run_dir / name).write_text('{"processes": [')  # cut short
    page = report.report(str(run_dir))
    assert f"{name} is not valid JSON" in page, page
    assert "None: every process ended well" not in page
    (run_dir / name).unlink()
    page = report.report(str(run_dir))
    assert f"{name} cannot be read" in page
    assert "banner bad" in page and "None: every process ended well" not in page


# The console's warning that other benchmarks ran beside this one is on the page too, and the
# banner is then no green one.
def test_the_warning_of_other_benchmarks_is_on_the_page(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    for row in s["rows"]:  # every benchmark ran: only the warning can make the banner bad
        for c in row["backends"].values():
            c["status"] = "ok"
    s["machine"].update(other_benchmarks=["4242 bench_run"], load_average_start=1.5,
                        load_average_end=2.25)
    (run_dir / "summary.json").write_text(json.dumps(s))
    page = report.report(str(run_dir))
    assert "other benchmarks ran on this machine during this run (4242 bench_run)" in page
    assert report.counted(["1 bench_run"] + [f"{i} bench_libtorch" for i in range(2, 40)]) == \
        "39 processes: bench_libtorch 38, bench_run 1"
    assert "timings may be inflated" in page and "class='banner bad'" in page


# The headline figure first; ratios as the summary writes them; names never broken inside; a run
# whose medians are mostly noisy is not shown under a green banner.
def test_figures_in_order_ratios_readable_names_whole_noise_said(run_dir):
    page = (run_dir / "report.html").read_text()
    shown = re.findall(r"<figcaption>([^<]+)</figcaption>", page)
    assert shown[0] == "speedup.png" and shown == report.figure_order(shown), shown
    assert not re.search(r"\de[+-]\d+x", page), "a ratio written in exponent form"
    assert report.human_ratio(1810.4) == "1810x" and report.human_ratio(32.31) == "32.3x"
    assert report.human_ratio(0.2345) == "0.23x"
    assert "<td class='name'>grad/tiny_graph</td>" in page
    assert "banner noisy" not in page  # one wide cell of many
    s = json.loads((run_dir / "summary.json").read_text())
    for row in s["rows"]:
        for cell in row["backends"].values():
            cell["wide"] = True
    (run_dir / "summary.json").write_text(json.dumps(s))
    noisy = report.report(str(run_dir))
    assert "medians have an interval wider than 10%: the machine was noisy" in noisy
    assert "class='banner bad'" in noisy or "class='banner noisy'" in noisy


# The conditions every number depends on are in the page's header (a bf16 run says so, and which
# bf16 path each backend took); a cell not run by design (skipped, or estimated above the memory
# limit) is no failure: no red banner, no red cell; times and ratios are two tables.
def test_the_header_says_the_conditions_and_planned_skips_are_not_failures(tmp_path):
    s = summary({k: v for k, v in TIMES.items() if "failed" not in v.values()}, FOUR)
    s["options"] = {"precision": "bf16", "isa": "avx2", "study": "main"}
    s["backend_contexts"] = {"engine": {"bf16_products": "widened"},
                             "libtorch": {"bf16_products": "aten (sums in bfloat16)"}}
    row = s["rows"][0]["backends"]
    row["libtorch"] = {"status": "skipped", "message": "not in libtorch's default sweep"}
    row["pytorch"] = {"status": "out_of_memory",
                      "message": "not run: estimated above the limit of 1.0 GB (2.0 GB)"}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    (tmp_path / "check.json").write_text(json.dumps({"results": []}))
    (tmp_path / "processes.json").write_text(json.dumps({"processes": []}))
    page = report.report(str(tmp_path))
    assert "precision bf16, instruction set avx2" in page, page
    assert "bf16 products: aten (sums in bfloat16) (libtorch); widened (engine)" in page
    assert "class='banner bad'" not in page and "<td class='bad'>" not in page
    assert "2 not run by design" in page
    assert "<h2>Median time per step</h2>" in page and "<h2>Time over engine's</h2>" in page
