//! The one table the benchmark prints: each figure, its floor, the goal, the measured value, the
//! ratio and whether the goal is met, then numbered notes (how each figure was measured).

use std::fmt::Write as _;

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is measured.
    pub figure: String,
    /// The least any implementation could do.
    pub floor: String,
    /// What we promise.
    pub goal: String,
    /// What this run measured.
    pub measured: String,
    /// Measured against the floor (or against the goal when there is no floor).
    pub ratio: String,
    /// Whether the goal is met.
    pub met: bool,
}

impl Row {
    /// A row of call counts: ratio is measured ÷ floor, met when measured ≤ goal.
    pub fn count(figure: impl Into<String>, floor: u64, goal_max: u64, goal: impl Into<String>, measured: u64) -> Row {
        Row {
            figure: figure.into(),
            floor: floor.to_string(),
            goal: goal.into(),
            measured: measured.to_string(),
            ratio: ratio(measured as f64, floor as f64, "× floor"),
            met: measured <= goal_max,
        }
    }
}

/// `a/b` as `1.00× floor`, or `n/a` when `b` is zero.
pub fn ratio(a: f64, b: f64, unit: &str) -> String {
    if b > 0.0 {
        format!("{:.2}{unit}", a / b)
    } else {
        "n/a".into()
    }
}

/// The table and its notes.
#[derive(Debug, Default, Clone)]
pub struct Table {
    /// Rows in order.
    pub rows: Vec<Row>,
    /// Notes printed under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// Adds rows.
    pub fn extend(&mut self, rows: impl IntoIterator<Item = Row>) {
        self.rows.extend(rows);
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Whether every goal is met.
    pub fn all_met(&self) -> bool {
        self.rows.iter().all(|r| r.met)
    }

    /// The rows that miss their goal.
    pub fn missed(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| !r.met).collect()
    }

    /// A Markdown table, then the notes.
    pub fn render(&self) -> String {
        let header = ["figure", "floor", "goal", "measured", "ratio", "met"];
        let cells: Vec<[String; 6]> = self
            .rows
            .iter()
            .map(|r| {
                let met = if r.met { "yes" } else { "NO" };
                [
                    r.figure.clone(),
                    r.floor.clone(),
                    r.goal.clone(),
                    r.measured.clone(),
                    r.ratio.clone(),
                    met.to_string(),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cols: &[String]| {
            let padded: Vec<String> =
                cols.iter().zip(widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = line(&header.map(String::from));
        out.push_str(&format!("|{}|\n", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|")));
        for row in &cells {
            out.push_str(&line(row));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for (i, n) in self.notes.iter().enumerate() {
                let _ = writeln!(out, "{}. {n}", i + 1);
            }
        }
        out
    }
}
