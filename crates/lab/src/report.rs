//! A self-contained HTML report with inline SVG charts: no scripts, no fonts, no external assets.
//!
//! ```text
//!  Report ── blocks in order ──▶ <h2> heading │ <p> paragraph │ <pre> command │ <table>
//!                                 │ <figure><svg> bar chart   │ <figure><svg> line chart
//! ```
//!
//! Charts are hand-written SVG (one `<svg>` per chart, 760 × 420 user units, scaled to the page
//! width): a title, a legend, a plot frame with grid lines, ticks and tick labels on both axes,
//! and axis labels that carry the units. Tick positions follow Heckbert's "nice numbers"
//! (Graphics Gems, 1990): the step is 1, 2, 5 or 10 times a power of ten, so labels read as
//! round numbers. A logarithmic x axis puts ticks at 1–2–5 × 10^k (or only at 10^k when the data
//! span more than three decades). Non-finite values (NaN, ±∞) and non-positive x values on a log
//! axis are skipped, never drawn; a chart with no drawable value says "no data".
//!
//! Every piece of caller text is escaped (`& < > " '`), so labels such as `p99 <5 µs & more` are
//! safe. The whole document is well-formed XML (void HTML elements are self-closed), which the
//! tests check with a small independent parser.
//!
//! ```
//! use fastpath_lab::report::{Chart, Report};
//! let mut r = Report::new("Linux bridge vs fastpath");
//! r.para("64-byte frames, one flow.")
//!     .table(&["DUT", "Mpps"], vec![vec!["linux-bridge".into(), "0.71".into()]])
//!     .line_chart(
//!         Chart::new("Throughput vs frame size")
//!             .x_label("frame size (bytes)")
//!             .y_label("throughput (Mpps)")
//!             .log_x()
//!             .series("linux-bridge", vec![(64.0, 0.71), (1518.0, 0.69)]),
//!     );
//! let html = r.to_html();
//! assert!(html.contains("<svg"));
//! ```

use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Series colours: Tableau 10, distinguishable in print and by most colour-blind readers.
const PALETTE: [&str; 10] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/// Width of every chart in SVG user units.
const W: f64 = 760.0;
/// Height of every chart in SVG user units.
const H: f64 = 420.0;
/// Left margin: room for the y tick labels and the rotated y axis label.
const LEFT: f64 = 78.0;
/// Right margin.
const RIGHT: f64 = 24.0;
/// Bottom margin: x tick labels and the x axis label.
const BOTTOM: f64 = 58.0;
/// Font stack of the page and the charts (installed system fonts only).
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";

/// One named series of (x, y) points, drawn as a line with markers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points in drawing order (usually by increasing x).
    pub points: Vec<(f64, f64)>,
}

/// One named series of (category, value) bars; bars of several series are grouped per category.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarSeries {
    /// Legend name.
    pub name: String,
    /// Bars; categories keep the order in which they first appear across all series.
    pub bars: Vec<(String, f64)>,
}

/// A chart: a title, axis labels (with units), data, and an optional logarithmic x axis.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// Title drawn above the plot.
    pub title: String,
    /// X axis label, with its unit, e.g. `frame size (bytes)`.
    pub x_label: String,
    /// Y axis label, with its unit, e.g. `throughput (Mpps)`.
    pub y_label: String,
    /// Logarithmic x axis (line charts only).
    pub log_x: bool,
    /// Explicit x tick positions (line charts), e.g. the RFC 2544 frame sizes; automatic if empty.
    pub x_ticks: Vec<f64>,
    /// Line series.
    pub series: Vec<Series>,
    /// Bar series.
    pub bars: Vec<BarSeries>,
}

impl Chart {
    /// A chart with a title and no data.
    pub fn new(title: impl Into<String>) -> Chart {
        Chart { title: title.into(), ..Chart::default() }
    }

    /// Sets the x axis label (include the unit).
    pub fn x_label(mut self, label: impl Into<String>) -> Chart {
        self.x_label = label.into();
        self
    }

    /// Sets the y axis label (include the unit).
    pub fn y_label(mut self, label: impl Into<String>) -> Chart {
        self.y_label = label.into();
        self
    }

    /// Makes the x axis logarithmic (line charts).
    pub fn log_x(mut self) -> Chart {
        self.log_x = true;
        self
    }

    /// Puts the x ticks at these values (line charts) instead of automatic round numbers.
    pub fn x_ticks(mut self, ticks: &[f64]) -> Chart {
        self.x_ticks = ticks.to_vec();
        self
    }

    /// Adds a line series.
    pub fn series(mut self, name: impl Into<String>, points: Vec<(f64, f64)>) -> Chart {
        self.series.push(Series { name: name.into(), points });
        self
    }

    /// Adds a bar series.
    pub fn bars(mut self, name: impl Into<String>, bars: Vec<(String, f64)>) -> Chart {
        self.bars.push(BarSeries { name: name.into(), bars });
        self
    }
}

#[derive(Clone, Debug)]
enum Block {
    Heading(String),
    Para(String),
    Pre(String),
    Table { headers: Vec<String>, rows: Vec<Vec<String>> },
    Svg(String),
}

/// An HTML report under construction. Blocks appear in the order they were added.
#[derive(Clone, Debug)]
pub struct Report {
    title: String,
    blocks: Vec<Block>,
}

impl Report {
    /// An empty report; `title` becomes the page title and the top heading.
    pub fn new(title: impl Into<String>) -> Report {
        Report { title: title.into(), blocks: Vec::new() }
    }

    /// Adds a section heading.
    pub fn heading(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Heading(text.into()));
        self
    }

    /// Adds a paragraph of plain text.
    pub fn para(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Para(text.into()));
        self
    }

    /// Adds preformatted text, e.g. the command line that produced the figures.
    pub fn pre(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Pre(text.into()));
        self
    }

    /// Adds a table. Short rows are padded with empty cells; numeric cells are right-aligned.
    pub fn table(&mut self, headers: &[&str], rows: Vec<Vec<String>>) -> &mut Report {
        let headers = headers.iter().map(|h| (*h).to_owned()).collect();
        self.blocks.push(Block::Table { headers, rows });
        self
    }

    /// Adds a grouped bar chart from `chart.bars` (line series are drawn as bars too, one
    /// category per distinct x value).
    pub fn bar_chart(&mut self, chart: Chart) -> &mut Report {
        self.blocks.push(Block::Svg(bar_svg(&chart)));
        self
    }

    /// Adds a line chart from `chart.series`.
    pub fn line_chart(&mut self, chart: Chart) -> &mut Report {
        self.blocks.push(Block::Svg(line_svg(&chart)));
        self
    }

    /// Renders the whole document.
    pub fn to_html(&self) -> String {
        let mut o = String::with_capacity(16 * 1024);
        let t = esc(&self.title);
        o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
        o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n");
        let _ = writeln!(o, "<title>{t}</title>");
        let _ = writeln!(o, "<style>{}</style>\n</head>\n<body>\n<main>\n<h1>{t}</h1>", css());
        for b in &self.blocks {
            match b {
                Block::Heading(s) => {
                    let _ = writeln!(o, "<h2>{}</h2>", esc(s));
                }
                Block::Para(s) => {
                    let _ = writeln!(o, "<p>{}</p>", esc(s));
                }
                Block::Pre(s) => {
                    let _ = writeln!(o, "<pre>{}</pre>", esc(s));
                }
                Block::Table { headers, rows } => table_html(&mut o, headers, rows),
                Block::Svg(svg) => {
                    let _ = writeln!(o, "<figure>\n{svg}</figure>");
                }
            }
        }
        o.push_str("</main>\n<footer>Generated by fastpath lab.</footer>\n</body>\n</html>\n");
        o
    }

    /// Writes the document to `path` (one self-contained HTML file).
    ///
    /// # Errors
    /// Any I/O error from creating or writing the file.
    pub fn write(&self, path: impl AsRef<Path>) -> io::Result<()> {
        std::fs::write(path, self.to_html())
    }
}

fn css() -> String {
    format!(
        "
:root {{ color-scheme: light; }}
body {{ margin: 0; background: #f6f8fa; color: #1f2328; font: 15px/1.55 {FONT}; }}
main {{ max-width: 980px; margin: 0 auto; padding: 24px 32px 8px; background: #fff;
       border-left: 1px solid #d8dee4; border-right: 1px solid #d8dee4; }}
h1 {{ font-size: 26px; font-weight: 600; margin: 8px 0 16px; padding-bottom: 8px;
     border-bottom: 2px solid #4e79a7; }}
h2 {{ font-size: 19px; font-weight: 600; margin: 28px 0 10px; padding-bottom: 4px;
     border-bottom: 1px solid #d8dee4; }}
p {{ margin: 8px 0 12px; }}
pre {{ background: #f6f8fa; border: 1px solid #d8dee4; border-radius: 6px; padding: 10px 12px;
      overflow-x: auto; font: 13px/1.45 ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace; }}
table {{ border-collapse: collapse; margin: 12px 0 20px; font-size: 14px;
        font-variant-numeric: tabular-nums; }}
th, td {{ padding: 5px 12px; border-bottom: 1px solid #e4e8ec; text-align: left; }}
th {{ background: #f0f3f6; font-weight: 600; border-bottom: 2px solid #c9d1d9; }}
tbody tr:nth-child(even) {{ background: #fafbfc; }}
td.num, th.num {{ text-align: right; }}
figure {{ margin: 16px 0 24px; padding: 8px; border: 1px solid #d8dee4; border-radius: 8px; }}
figure svg {{ display: block; width: 100%; height: auto; }}
footer {{ max-width: 980px; margin: 0 auto; padding: 12px 32px 24px; color: #656d76;
         font-size: 13px; }}
"
    )
}

fn table_html(o: &mut String, headers: &[String], rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).chain(std::iter::once(headers.len())).max().unwrap_or(0);
    // A column is numeric when every non-empty cell in it is a number.
    let numeric: Vec<bool> = (0..cols)
        .map(|c| {
            let mut any = false;
            let all = rows.iter().all(|r| match r.get(c).map(|s| s.trim()) {
                None | Some("") | Some("-") | Some("—") => true,
                Some(s) => {
                    any = true;
                    is_number(s)
                }
            });
            all && any
        })
        .collect();
    let class = |c: usize| {
        if numeric.get(c).copied().unwrap_or(false) {
            " class=\"num\""
        } else {
            ""
        }
    };
    o.push_str("<table>\n<thead><tr>");
    for c in 0..cols {
        let h = headers.get(c).map(String::as_str).unwrap_or("");
        let _ = write!(o, "<th{}>{}</th>", class(c), esc(h));
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        o.push_str("<tr>");
        for c in 0..cols {
            let v = r.get(c).map(String::as_str).unwrap_or("");
            let _ = write!(o, "<td{}>{}</td>", class(c), esc(v));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody>\n</table>\n");
}

/// True for `12`, `-0.5`, `1e6`, `12.5 %`, `3.1 Gbps`-free plain numbers with an optional `%`
/// or `×` suffix.
fn is_number(s: &str) -> bool {
    let t = s.trim_end_matches(['%', '×', 'x']).trim();
    !t.is_empty() && t.parse::<f64>().is_ok()
}

/// Escapes text for HTML/XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0 text.
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' && c != '\r' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

// ---------------------------------------------------------------------------------------------
// Scales and ticks
// ---------------------------------------------------------------------------------------------

/// Heckbert's nice number: a value of 1, 2, 5 or 10 × 10^k close to `x` (> 0).
fn nice(x: f64, round: bool) -> f64 {
    let exp = x.log10().floor();
    let base = 10f64.powf(exp);
    let f = x / base;
    let nf = if round {
        if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        }
    } else if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * base
}

/// A linear axis: domain `[lo, hi]` widened to whole steps, and the ticks in it.
#[derive(Clone, Debug, PartialEq)]
struct LinAxis {
    lo: f64,
    hi: f64,
    step: f64,
}

impl LinAxis {
    /// Nice axis covering `[min, max]` with about `target` ticks.
    fn new(min: f64, max: f64, target: usize) -> LinAxis {
        let (mut min, mut max) = (min, max);
        if !(min.is_finite() && max.is_finite()) || min > max {
            (min, max) = (0.0, 1.0);
        }
        if max == min {
            let pad = if min == 0.0 { 1.0 } else { min.abs() * 0.1 };
            (min, max) = (min - pad, max + pad);
        }
        let range = nice(max - min, false);
        let step = nice(range / (target.max(2) - 1) as f64, true);
        let lo = (min / step).floor() * step;
        let hi = (max / step).ceil() * step;
        LinAxis { lo, hi, step }
    }

    fn ticks(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round() as i64;
        (0..=n.clamp(0, 100)).map(|i| self.lo + i as f64 * self.step).collect()
    }
}

/// A logarithmic axis over `[lo, hi]` (both > 0).
#[derive(Clone, Debug, PartialEq)]
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// Covers `[min, max]` (both > 0) with a little padding on each side.
    fn new(min: f64, max: f64) -> LogAxis {
        if !(min > 0.0 && max >= min && max.is_finite()) {
            return LogAxis { lo: 1.0, hi: 10.0 };
        }
        if max == min {
            return LogAxis { lo: min / 2.0, hi: max * 2.0 };
        }
        let pad = (max / min).powf(0.04);
        LogAxis { lo: min / pad, hi: max * pad }
    }

    fn ticks(&self) -> Vec<f64> {
        let (e0, e1) = (self.lo.log10().floor() as i32, self.hi.log10().ceil() as i32);
        let mults: &[f64] = if e1 - e0 > 3 { &[1.0] } else { &[1.0, 2.0, 5.0] };
        let mut t = Vec::new();
        for e in e0..=e1.min(e0 + 40) {
            for m in mults {
                let v = m * 10f64.powi(e);
                if v >= self.lo * (1.0 - 1e-9) && v <= self.hi * (1.0 + 1e-9) {
                    t.push(v);
                }
            }
        }
        t
    }
}

/// Formats a tick value so that neighbouring ticks `step` apart are distinguishable, with a k/M/G
/// suffix for large magnitudes.
fn fmt_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step.abs() * 1e-9 { 0.0 } else { v };
    let mag = v.abs().max(step.abs());
    let (div, suf) = if mag >= 1e9 && step >= 1e8 {
        (1e9, "G")
    } else if mag >= 1e6 && step >= 1e5 {
        (1e6, "M")
    } else if mag >= 1e4 && step >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let s = step.abs() / div;
    let mut d = 0usize;
    while d < 6 && ((s * 10f64.powi(d as i32)).round() - s * 10f64.powi(d as i32)).abs() > 1e-6 {
        d += 1;
    }
    format!("{:.*}{suf}", d, v / div)
}

/// Formats a log-axis tick (1, 2, 5 × 10^k): `0.5`, `20`, `2k`, `10M`.
fn fmt_log_tick(v: f64) -> String {
    let (div, suf) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let step = 10f64.powf((v / div).log10().floor()) * div;
    format!("{}{suf}", fmt_tick(v / div, step / div))
}

/// Formats a data value for a label or tooltip with about four significant digits.
fn fmt_val(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let mag = v.abs().log10().floor() as i32;
    let d = (3 - mag).clamp(0, 6) as usize;
    format!("{v:.d$}")
}

/// Formats `v` with at most `sig` significant digits and no trailing zeros: `64`, `0.5`, `1518`.
fn fmt_short(v: f64, sig: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let mag = v.abs().log10().floor() as i32;
    let d = (sig - 1 - mag).clamp(0, 6) as usize;
    let s = format!("{v:.d$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// An x axis scale: data x to a fraction of the axis.
#[derive(Clone, Copy)]
enum XScale {
    Lin { lo: f64, span: f64 },
    Log { l0: f64, l1: f64 },
}

impl XScale {
    fn frac(self, x: f64) -> f64 {
        match self {
            XScale::Lin { lo, span } => (x - lo) / span,
            XScale::Log { l0, l1 } => (x.log10() - l0) / (l1 - l0),
        }
    }
}

/// Maps data coordinates to SVG coordinates inside the plot frame.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    /// Screen x for a fraction `t` in `[0, 1]` of the x axis.
    fn sx(&self, t: f64) -> f64 {
        self.x0 + t * (self.x1 - self.x0)
    }
    /// Screen y for a fraction `t` in `[0, 1]` of the y axis (0 = bottom).
    fn sy(&self, t: f64) -> f64 {
        self.y1 - t * (self.y1 - self.y0)
    }
}

// ---------------------------------------------------------------------------------------------
// SVG
// ---------------------------------------------------------------------------------------------

/// Rough text width for a label at `size` px (average glyph ≈ 0.58 em in sans-serif fonts).
fn text_w(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// Lays out the legend entries in rows that fit the plot width; returns (x, row) per entry.
fn legend_layout(names: &[&str]) -> (Vec<(f64, usize)>, usize) {
    let mut out = Vec::with_capacity(names.len());
    let (mut x, mut row) = (LEFT, 0usize);
    for n in names {
        let w = 18.0 + text_w(n, 12.0) + 20.0;
        if x + w > W - RIGHT && x > LEFT {
            x = LEFT;
            row += 1;
        }
        out.push((x, row));
        x += w;
    }
    let rows = if names.is_empty() { 0 } else { row + 1 };
    (out, rows)
}

/// Opens the `<svg>`, draws title and legend, and returns the plot frame.
fn svg_open(o: &mut String, title: &str, names: &[&str]) -> Frame {
    let (legend, rows) = legend_layout(names);
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" \
         height=\"{H}\" role=\"img\" font-family=\"{}\" font-size=\"12\" fill=\"#1f2328\">",
        esc(FONT)
    );
    let _ = writeln!(o, "<title>{}</title>", esc(title));
    let _ = writeln!(o, "<rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        o,
        "<text class=\"chart-title\" x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" \
         font-weight=\"600\">{}</text>",
        W / 2.0,
        esc(title)
    );
    for (i, ((x, row), name)) in legend.iter().zip(names).enumerate() {
        let y = 44.0 + *row as f64 * 18.0;
        let c = PALETTE[i % PALETTE.len()];
        let _ = writeln!(
            o,
            "<g class=\"legend\"><rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" rx=\"2\" \
             fill=\"{c}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            y - 10.0,
            x + 18.0,
            y,
            esc(name)
        );
    }
    let top = if rows == 0 { 48.0 } else { 44.0 + rows as f64 * 18.0 + 6.0 };
    Frame { x0: LEFT, x1: W - RIGHT, y0: top, y1: H - BOTTOM }
}

/// Draws the y grid, y ticks and labels, the frame and both axis labels.
fn axes(o: &mut String, f: &Frame, y: &LinAxis, x_label: &str, y_label: &str) {
    o.push_str("<g class=\"y-axis\">\n");
    for t in y.ticks() {
        let py = f.sy((t - y.lo) / (y.hi - y.lo));
        let _ = writeln!(
            o,
            "<line x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#e4e8ec\"/>\
             <line x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#57606a\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#57606a\">{}</text>",
            f.x0,
            f.x1,
            f.x0 - 5.0,
            f.x0,
            f.x0 - 8.0,
            py + 4.0,
            esc(&fmt_tick(t, y.step))
        );
    }
    o.push_str("</g>\n");
    let _ = writeln!(
        o,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" \
         stroke=\"#8c959f\"/>",
        f.x0,
        f.y0,
        f.x1 - f.x0,
        f.y1 - f.y0
    );
    let _ = writeln!(
        o,
        "<text class=\"x-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        (f.x0 + f.x1) / 2.0,
        H - 14.0,
        esc(x_label)
    );
    let cy = (f.y0 + f.y1) / 2.0;
    let _ = writeln!(
        o,
        "<text class=\"y-label\" x=\"20\" y=\"{cy:.1}\" text-anchor=\"middle\" font-size=\"13\" \
         transform=\"rotate(-90 20 {cy:.1})\">{}</text>",
        esc(y_label)
    );
}

/// One x tick mark with its label at screen x `px`.
fn x_tick(o: &mut String, f: &Frame, px: f64, label: &str, grid: bool) {
    if grid {
        let _ = write!(o, "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#eef1f4\"/>", f.y0, f.y1);
    }
    let _ = writeln!(
        o,
        "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#57606a\"/>\
         <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#57606a\">{}</text>",
        f.y1,
        f.y1 + 5.0,
        f.y1 + 19.0,
        esc(label)
    );
}

fn no_data(o: &mut String, f: &Frame) {
    let _ = writeln!(
        o,
        "<text class=\"no-data\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"14\" \
         fill=\"#8c959f\">no data</text>",
        (f.x0 + f.x1) / 2.0,
        (f.y0 + f.y1) / 2.0
    );
}

/// The y axis for values `ys`: always includes zero, so bars and rates are not exaggerated.
fn y_axis(ys: impl Iterator<Item = f64>) -> LinAxis {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for y in ys {
        lo = lo.min(y);
        hi = hi.max(y);
    }
    if lo == hi {
        hi = 1.0;
    }
    LinAxis::new(lo, hi, 6)
}

/// Renders a line chart to an `<svg>` element.
fn line_svg(c: &Chart) -> String {
    let mut o = String::with_capacity(8 * 1024);
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    let f = svg_open(&mut o, &c.title, &names);
    let ok = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!c.log_x || x > 0.0);
    let pts = || c.series.iter().flat_map(|s| s.points.iter().copied()).filter(|p| ok(p));
    let y = y_axis(pts().map(|p| p.1));
    let any = pts().next().is_some();
    let (xmin, xmax) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    // x fraction of the axis for a data x.
    let (scale, ticks): (XScale, Vec<(f64, String)>) = if c.log_x {
        let a = LogAxis::new(xmin, xmax);
        let scale = XScale::Log { l0: a.lo.log10(), l1: a.hi.log10() };
        let t = a.ticks().into_iter().map(|v| (scale.frac(v), fmt_log_tick(v))).collect();
        (scale, t)
    } else {
        let a = if any { LinAxis::new(xmin, xmax, 8) } else { LinAxis::new(0.0, 1.0, 8) };
        let scale = XScale::Lin { lo: a.lo, span: a.hi - a.lo };
        let t = a.ticks().into_iter().map(|v| (scale.frac(v), fmt_tick(v, a.step))).collect();
        (scale, t)
    };
    let xt = |x: f64| scale.frac(x);
    let ticks = if c.x_ticks.is_empty() {
        ticks
    } else {
        let fine = |v: &f64| v.is_finite() && (!c.log_x || *v > 0.0);
        let t = c.x_ticks.iter().filter(|v| fine(v)).map(|&v| (xt(v), fmt_short(v, 4)));
        t.filter(|(t, _)| (-1e-9..=1.0 + 1e-9).contains(t)).collect()
    };
    axes(&mut o, &f, &y, &c.x_label, &c.y_label);
    o.push_str("<g class=\"x-axis\">\n");
    for (t, label) in &ticks {
        x_tick(&mut o, &f, f.sx(*t), label, true);
    }
    o.push_str("</g>\n");
    if !any {
        no_data(&mut o, &f);
    }
    let yt = |v: f64| (v - y.lo) / (y.hi - y.lo);
    let markers = c.series.iter().map(|s| s.points.len()).max().unwrap_or(0) <= 60;
    for (i, s) in c.series.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let mut d = String::new();
        let mut pen_down = false;
        for p in &s.points {
            if !ok(p) {
                pen_down = false; // a gap: the next point starts a new sub-path
                continue;
            }
            let _ = write!(d, "{}{:.1} {:.1} ", if pen_down { "L" } else { "M" }, f.sx(xt(p.0)), f.sy(yt(p.1)));
            pen_down = true;
        }
        let _ = writeln!(o, "<g class=\"series\" stroke=\"{col}\" fill=\"{col}\">");
        if !d.is_empty() {
            let _ = writeln!(
                o,
                "<path d=\"{}\" fill=\"none\" stroke-width=\"2.2\" stroke-linejoin=\"round\" \
                 stroke-linecap=\"round\"/>",
                d.trim_end()
            );
        }
        if markers {
            for p in s.points.iter().filter(|p| ok(p)) {
                let _ = writeln!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.2\" stroke=\"#ffffff\" stroke-width=\"1\">\
                     <title>{}: {}, {}</title></circle>",
                    f.sx(xt(p.0)),
                    f.sy(yt(p.1)),
                    esc(&s.name),
                    fmt_val(p.0),
                    fmt_val(p.1)
                );
            }
        }
        o.push_str("</g>\n");
    }
    o.push_str("</svg>\n");
    o
}

/// Renders a grouped bar chart to an `<svg>` element.
fn bar_svg(c: &Chart) -> String {
    // Line series become bar series with one category per x value.
    let mut all: Vec<BarSeries> = c.bars.clone();
    for s in &c.series {
        let bars = s.points.iter().map(|&(x, y)| (fmt_val(x), y)).collect();
        all.push(BarSeries { name: s.name.clone(), bars });
    }
    let mut cats: Vec<&str> = Vec::new();
    for s in &all {
        for (k, _) in &s.bars {
            if !cats.contains(&k.as_str()) {
                cats.push(k);
            }
        }
    }
    let mut o = String::with_capacity(8 * 1024);
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    let f = svg_open(&mut o, &c.title, &names);
    let vals = || all.iter().flat_map(|s| s.bars.iter().map(|b| b.1)).filter(|v| v.is_finite());
    let y = y_axis(vals());
    axes(&mut o, &f, &y, &c.x_label, &c.y_label);
    let yt = |v: f64| (v - y.lo) / (y.hi - y.lo);
    let n = cats.len().max(1) as f64;
    let slot = (f.x1 - f.x0) / n;
    let group = slot * 0.78;
    let bw = group / all.len().max(1) as f64;
    o.push_str("<g class=\"x-axis\">\n");
    for (i, k) in cats.iter().enumerate() {
        x_tick(&mut o, &f, f.x0 + slot * (i as f64 + 0.5), k, false);
    }
    o.push_str("</g>\n");
    if vals().next().is_none() {
        no_data(&mut o, &f);
    }
    let labels = cats.len() * all.len() <= 40;
    let zero = f.sy(yt(0.0));
    for (si, s) in all.iter().enumerate() {
        let col = PALETTE[si % PALETTE.len()];
        let _ = writeln!(o, "<g class=\"series\" fill=\"{col}\">");
        for (k, v) in &s.bars {
            if !v.is_finite() {
                continue;
            }
            let ci = cats.iter().position(|c| c == k).unwrap_or(0);
            let x = f.x0 + slot * ci as f64 + (slot - group) / 2.0 + bw * si as f64;
            let py = f.sy(yt(*v));
            let (top, h) = if py < zero { (py, zero - py) } else { (zero, py - zero) };
            let _ = writeln!(
                o,
                "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{h:.1}\" rx=\"1.5\">\
                 <title>{} — {}: {}</title></rect>",
                x + 1.0,
                (bw - 2.0).max(1.0),
                esc(&s.name),
                esc(k),
                fmt_val(*v)
            );
            let label = fmt_short(*v, 3);
            // Value labels only where they fit over the bar without touching the neighbours.
            if labels && text_w(&label, 10.0) <= bw + 2.0 {
                let ly = if py < zero { top - 4.0 } else { top + h + 12.0 };
                let _ = writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\" font-size=\"10\" \
                     fill=\"#424a53\">{label}</text>",
                    x + bw / 2.0,
                );
            }
        }
        o.push_str("</g>\n");
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small, independent XML well-formedness checker: balanced and properly nested tags,
    /// quoted and unique attributes, no raw `<` or bad entity in text or attribute values,
    /// exactly one root element. Returns the number of elements.
    fn check_xml(s: &str) -> Result<usize, String> {
        fn entity(b: &[u8], i: usize) -> Result<usize, String> {
            let end = b[i..].iter().position(|&c| c == b';').ok_or(format!("bare & at {i}"))?;
            let name = std::str::from_utf8(&b[i + 1..i + end]).map_err(|e| e.to_string())?;
            let ok = matches!(name, "amp" | "lt" | "gt" | "quot" | "apos")
                || name.strip_prefix("#x").is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                || name.strip_prefix('#').is_some_and(|d| d.parse::<u32>().is_ok());
            if ok {
                Ok(i + end + 1)
            } else {
                Err(format!("bad entity &{name}; at {i}"))
            }
        }
        let name_ch = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b':' | b'.');
        let b = s.as_bytes();
        let (mut i, mut stack, mut count, mut roots) = (0usize, Vec::<&str>::new(), 0usize, 0usize);
        while i < b.len() {
            if b[i] == b'&' {
                i = entity(b, i)?;
                continue;
            }
            if b[i] != b'<' {
                if stack.is_empty() && !b[i].is_ascii_whitespace() {
                    return Err(format!("text outside the root at {i}"));
                }
                i += 1;
                continue;
            }
            let rest = &s[i..];
            if rest.starts_with("<!--") {
                i += rest.find("-->").ok_or("unclosed comment")? + 3;
            } else if rest.starts_with("<!DOCTYPE") || rest.starts_with("<?") {
                i += rest.find('>').ok_or("unclosed declaration")? + 1;
            } else if let Some(r) = rest.strip_prefix("</") {
                let n = r.bytes().take_while(|&c| name_ch(c)).count();
                let name = &r[..n];
                if r.as_bytes().get(n) != Some(&b'>') {
                    return Err(format!("bad end tag </{name} at {i}"));
                }
                match stack.pop() {
                    Some(open) if open == name => {}
                    other => return Err(format!("</{name}> closes {other:?} at {i}")),
                }
                i += 2 + n + 1;
            } else {
                let mut j = i + 1;
                let n = b[j..].iter().take_while(|&&c| name_ch(c)).count();
                if n == 0 {
                    return Err(format!("raw < at {i}"));
                }
                let name = &s[j..j + n];
                if stack.is_empty() {
                    roots += 1;
                }
                j += n;
                let mut attrs = Vec::new();
                loop {
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    match b.get(j) {
                        Some(b'>') => {
                            stack.push(name);
                            j += 1;
                            break;
                        }
                        Some(b'/') if b.get(j + 1) == Some(&b'>') => {
                            j += 2;
                            break;
                        }
                        Some(_) => {}
                        None => return Err("unclosed tag".into()),
                    }
                    let an = b[j..].iter().take_while(|&&c| name_ch(c)).count();
                    if an == 0 || b.get(j + an) != Some(&b'=') {
                        return Err(format!("bad attribute in <{name}> at {j}"));
                    }
                    let aname = &s[j..j + an];
                    if attrs.contains(&aname) {
                        return Err(format!("duplicate attribute {aname} in <{name}>"));
                    }
                    attrs.push(aname);
                    j += an + 1;
                    let q = *b.get(j).ok_or("eof")?;
                    if q != b'"' && q != b'\'' {
                        return Err(format!("unquoted attribute {aname}"));
                    }
                    j += 1;
                    while b.get(j).ok_or("eof in attribute")? != &q {
                        match b[j] {
                            b'<' => return Err(format!("< in attribute {aname}")),
                            b'&' => j = entity(b, j)?,
                            _ => j += 1,
                        }
                    }
                    j += 1;
                }
                count += 1;
                i = j;
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed elements {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(count)
    }

    fn svgs(html: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = html;
        while let Some(a) = rest.find("<svg") {
            let end = rest[a..].find("</svg>").map(|e| a + e + 6).unwrap_or(rest.len());
            out.push(&rest[a..end]);
            rest = &rest[end..];
        }
        out
    }

    fn sample() -> Report {
        let sizes = [64.0, 128.0, 256.0, 512.0, 1024.0, 1280.0, 1518.0];
        let mut r = Report::new("Lab report");
        r.heading("Throughput")
            .para("Measured on veth.")
            .pre("fastpath lab rfc2544 --dut linux-bridge")
            .table(
                &["DUT", "Mpps", "loss"],
                vec![vec!["linux-bridge".into(), "0.71".into(), "0 %".into()], vec!["fastpath".into(), "1.52".into()]],
            )
            .line_chart(
                Chart::new("Throughput vs frame size")
                    .x_label("frame size (bytes)")
                    .y_label("throughput (Mpps)")
                    .log_x()
                    .series("linux-bridge", sizes.iter().map(|&s| (s, 0.7 - s / 1e4)).collect())
                    .series("fastpath", sizes.iter().map(|&s| (s, 1.5 - s / 1e4)).collect()),
            )
            .bar_chart(
                Chart::new("Latency at 50 % load")
                    .x_label("percentile")
                    .y_label("latency (µs)")
                    .bars("linux-bridge", vec![("p50".into(), 120.0), ("p99".into(), 410.0)])
                    .bars("fastpath", vec![("p50".into(), 40.0), ("p99".into(), 95.0)]),
            );
        r
    }

    #[test]
    fn whole_document_and_every_svg_are_well_formed_xml() {
        let html = sample().to_html();
        let n = check_xml(&html).unwrap();
        assert!(n > 50, "only {n} elements");
        let s = svgs(&html);
        assert_eq!(s.len(), 2);
        for svg in s {
            check_xml(svg).unwrap();
            assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        }
    }

    #[test]
    fn checker_rejects_broken_xml() {
        assert!(check_xml("<a><b></a></b>").is_err());
        assert!(check_xml("<a x=\"1\" x=\"2\"/>").is_err());
        assert!(check_xml("<a>1 < 2</a>").is_err());
        assert!(check_xml("<a>fish & chips</a>").is_err());
        assert!(check_xml("<a>").is_err());
        assert!(check_xml("<a/><b/>").is_err());
        assert_eq!(check_xml("<a t=\"&lt;\"><b/>&amp;</a>"), Ok(2));
    }

    #[test]
    fn titles_axis_labels_legend_and_ticks_are_present() {
        let html = sample().to_html();
        let s = svgs(&html);
        let line = s[0];
        assert!(line.contains("<title>Throughput vs frame size</title>"));
        assert!(line.contains(">frame size (bytes)</text>"));
        assert!(line.contains(">throughput (Mpps)</text>"));
        assert!(line.contains(">linux-bridge</text>") && line.contains(">fastpath</text>"));
        // Log axis 64..1518: ticks at 100, 200, 500, 1k.
        for t in [">100</text>", ">200</text>", ">500</text>", ">1k</text>"] {
            assert!(line.contains(t), "missing tick {t}");
        }
        assert_eq!(line.matches("<path ").count(), 2);
        assert_eq!(line.matches("<circle ").count(), 14);
        let bar = s[1];
        assert!(bar.contains(">latency (µs)</text>") && bar.contains(">p99</text>"));
        assert_eq!(bar.matches("<rect ").count(), 2 + 2 + 4, "background, frame, legend×2, bars×4");
        assert!(html.contains("<h1>Lab report</h1>") && html.contains("<h2>Throughput</h2>"));
        assert!(html.contains("<td class=\"num\">1.52</td>"));
        assert!(html.contains("<td class=\"num\"></td>"), "short row padded");
    }

    #[test]
    fn caller_text_is_escaped_everywhere() {
        let evil = "a<b & c>\"d\"'";
        let mut r = Report::new(evil);
        r.para(evil).pre(evil).table(&[evil], vec![vec![evil.into()]]);
        r.line_chart(Chart::new(evil).x_label(evil).y_label(evil).series(evil, vec![(1.0, 2.0)]));
        r.bar_chart(Chart::new(evil).bars(evil, vec![(evil.into(), 3.0)]));
        let html = r.to_html();
        check_xml(&html).unwrap();
        assert!(!html.contains(evil));
        let escaped = "a&lt;b &amp; c&gt;&quot;d&quot;&#39;";
        // title, h1, p, pre, th, td; line: title, text, x, y, legend, tooltip; bar: ... categories.
        assert!(html.matches(escaped).count() >= 15, "{}", html.matches(escaped).count());
    }

    #[test]
    fn empty_charts_say_no_data_and_stay_well_formed() {
        let mut r = Report::new("empty");
        r.line_chart(Chart::new("no series"));
        r.line_chart(Chart::new("empty series").series("a", vec![]));
        r.line_chart(Chart::new("log, only bad points").log_x().series("a", vec![(0.0, 1.0), (-3.0, 2.0)]));
        r.bar_chart(Chart::new("no bars"));
        r.bar_chart(Chart::new("nan bars").bars("a", vec![("x".into(), f64::NAN)]));
        r.table(&["a"], vec![]);
        let html = r.to_html();
        check_xml(&html).unwrap();
        for svg in svgs(&html) {
            check_xml(svg).unwrap();
            assert!(svg.contains(">no data</text>"), "{svg}");
        }
    }

    #[test]
    fn non_finite_points_break_the_line_and_are_never_printed() {
        let c = Chart::new("gaps").series("s", vec![(0.0, 1.0), (1.0, f64::NAN), (2.0, 3.0), (3.0, 4.0), (f64::INFINITY, 1.0)]);
        let svg = line_svg(&c);
        check_xml(&svg).unwrap();
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        let d = svg.split("<path d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(d.matches('L').count(), 1, "{d}");
        assert_eq!(svg.matches("<circle ").count(), 3);
    }

    #[test]
    fn points_land_on_their_ticks() {
        // x in 0..10, y in 0..100: the point (10, 100) sits on the top-right corner of the frame.
        let c = Chart::new("t").series("s", vec![(0.0, 0.0), (10.0, 100.0)]);
        let svg = line_svg(&c);
        let f = Frame { x0: LEFT, x1: W - RIGHT, y0: 44.0 + 18.0 + 6.0, y1: H - BOTTOM };
        let want = format!("M{:.1} {:.1} L{:.1} {:.1}", f.x0, f.y1, f.x1, f.y0);
        assert!(svg.contains(&want), "want {want} in {svg}");
    }

    #[test]
    fn explicit_x_ticks_replace_automatic_ones() {
        let sizes = [64.0, 128.0, 256.0, 512.0, 1024.0, 1280.0, 1518.0];
        let c = Chart::new("t").log_x().x_ticks(&sizes).series("s", sizes.iter().map(|&s| (s, 1.0)).collect());
        let svg = line_svg(&c);
        check_xml(&svg).unwrap();
        for s in ["64", "128", "256", "512", "1024", "1280", "1518"] {
            assert!(svg.contains(&format!(">{s}</text>")), "tick {s}");
        }
        assert!(!svg.contains(">1k</text>") && !svg.contains(">200</text>"));
    }

    #[test]
    fn bar_value_labels_only_where_they_fit() {
        let few = bar_svg(&Chart::new("t").bars("a", vec![("x".into(), 123.456)]));
        assert!(few.contains(">123</text>"));
        let many: Vec<(String, f64)> = (0..30).map(|i| (format!("c{i}"), 123456.0)).collect();
        let svg = bar_svg(&Chart::new("t").bars("a", many.clone()).bars("b", many));
        assert!(!svg.contains(">123000</text>") && !svg.contains(">123456</text>"));
    }

    #[test]
    fn tick_labels() {
        assert_eq!(fmt_short(1518.0, 4), "1518");
        assert_eq!(fmt_short(0.5, 3), "0.5");
        assert_eq!(fmt_short(12.345, 3), "12.3");
        assert_eq!(fmt_tick(0.25, 0.25), "0.25");
        assert_eq!(fmt_tick(1.0, 0.5), "1.0");
        assert_eq!(fmt_tick(20000.0, 5000.0), "20k");
        assert_eq!(fmt_tick(2_500_000.0, 500_000.0), "2.5M");
        assert_eq!(fmt_tick(-1e-17, 0.2), "0.0");
        assert_eq!(fmt_log_tick(2000.0), "2k");
        assert_eq!(fmt_log_tick(0.5), "0.5");
        assert_eq!(fmt_val(1234.5678), "1235");
        assert_eq!(fmt_val(0.012346), "0.01235");
    }

    #[test]
    fn log_ticks_span_decades() {
        let a = LogAxis::new(1.0, 1e6);
        assert_eq!(a.ticks(), vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
        let a = LogAxis::new(64.0, 1518.0);
        assert_eq!(a.ticks(), vec![100.0, 200.0, 500.0, 1000.0]);
    }

    #[test]
    fn a_file_is_written() {
        let p = std::env::temp_dir().join(format!("fastpath-report-{}.html", std::process::id()));
        sample().write(&p).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(s, sample().to_html());
    }

    proptest! {
        #[test]
        fn nice_axis_covers_data_with_round_steps(a in -1e9f64..1e9, b in -1e9f64..1e9, n in 3usize..10) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let ax = LinAxis::new(lo, hi, n);
            prop_assert!(ax.lo <= lo && ax.hi >= hi);
            let t = ax.ticks();
            prop_assert!(t.len() >= 2 && t.len() <= 2 * n + 2, "{} ticks for {n}", t.len());
            let m = ax.step / 10f64.powf(ax.step.log10().floor());
            prop_assert!([1.0, 2.0, 5.0, 10.0].iter().any(|k| (m - k).abs() < 1e-6), "step {}", ax.step);
            // Labels of neighbouring ticks differ.
            let labels: Vec<String> = t.iter().map(|&v| fmt_tick(v, ax.step)).collect();
            for w in labels.windows(2) { prop_assert_ne!(&w[0], &w[1]); }
        }

        #[test]
        fn any_chart_is_well_formed(
            pts in proptest::collection::vec((-1e6f64..1e6, -1e6f64..1e6), 0..40),
            log in any::<bool>(),
            name in ".{0,12}",
        ) {
            let c = Chart { title: name.clone(), log_x: log, ..Chart::default() }
                .series(name.clone(), pts.clone());
            prop_assert!(check_xml(&line_svg(&c)).is_ok());
            let bars = pts.iter().map(|p| (format!("{:.0}", p.0), p.1)).collect();
            prop_assert!(check_xml(&bar_svg(&Chart::new(name.clone()).bars(name, bars))).is_ok());
        }
    }
}
