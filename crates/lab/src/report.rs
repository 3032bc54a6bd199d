//! HTML report with SVG charts.
