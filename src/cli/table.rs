//! Plain-text tables sized to their contents, for command output.

/// A table with a header row; columns are left-aligned unless marked numeric.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    numeric: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; a `#` prefix marks a right-aligned (numeric) column.
    pub fn new(columns: &[&str]) -> Self {
        Table {
            headers: columns
                .iter()
                .map(|c| c.trim_start_matches('#').to_string())
                .collect(),
            numeric: columns.iter().map(|c| c.starts_with('#')).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are blank.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, two spaces between columns, no trailing spaces.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .filter_map(|row| row.get(i))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    line.push_str("  ");
                }
                if self.numeric[i] {
                    line.push_str(&format!("{cell:>width$}"));
                } else {
                    line.push_str(&format!("{cell:<width$}"));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_their_widest_cell() {
        let mut t = Table::new(&["NAME", "#PRICE"]);
        t.row(vec!["general-purpose".into(), "0.5".into()]);
        t.row(vec!["gpu".into(), "12.25".into()]);
        assert_eq!(
            t.render(),
            "NAME             PRICE\ngeneral-purpose    0.5\ngpu              12.25\n"
        );
    }
}
