//! The overview's throughput chart: one stacked bar a minute (completed, failed, other), drawn
//! as SVG by the server — no script, no inline style.

use leasefence::Minute;

use super::view::clock;

/// The chart's drawing area, in SVG units.
pub(crate) const WIDTH: u32 = 600;
pub(crate) const HEIGHT: u32 = 120;

/// One bar's segments, top to bottom.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub(crate) x: u32,
    pub(crate) width: u32,
    /// `(y, height, class)` of each non-empty segment.
    pub(crate) segments: Vec<(u32, u32, &'static str)>,
    /// What a pointer over it says: `07:31: 12 completed, 1 failed, 0 other`.
    pub(crate) title: String,
}

/// The chart of a series of minutes.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub(crate) bars: Vec<Bar>,
    /// The tallest bar's total (the top of the scale).
    pub(crate) top: u64,
    pub(crate) first: String,
    pub(crate) last: String,
    /// What the chart shows, in words (its accessible name).
    pub(crate) summary: String,
}

impl Chart {
    pub(crate) fn of(minutes: &[Minute]) -> Chart {
        let top = minutes
            .iter()
            .map(|m| m.completed + m.failed + m.other)
            .max()
            .unwrap_or(0);
        let n = minutes.len().max(1) as u32;
        let slot = WIDTH / n;
        let scale = |v: u64| -> u32 {
            if top == 0 {
                0
            } else {
                ((v as f64 / top as f64) * HEIGHT as f64).round() as u32
            }
        };
        let bars = minutes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut y = HEIGHT;
                let mut segments = Vec::new();
                for (value, class) in [
                    (m.completed, "completed"),
                    (m.failed, "failed"),
                    (m.other, "other"),
                ] {
                    let h = scale(value).min(y);
                    if h > 0 {
                        y -= h;
                        segments.push((y, h, class));
                    }
                }
                Bar {
                    x: i as u32 * slot + 2,
                    width: slot.saturating_sub(4).max(1),
                    segments,
                    title: format!(
                        "{}: {} completed, {} failed, {} other",
                        clock(m.start),
                        m.completed,
                        m.failed,
                        m.other
                    ),
                }
            })
            .collect();
        let (completed, failed, other) = minutes.iter().fold((0, 0, 0), |(c, f, o), m| {
            (c + m.completed, f + m.failed, o + m.other)
        });
        Chart {
            bars,
            top,
            first: minutes.first().map(|m| clock(m.start)).unwrap_or_default(),
            last: minutes.last().map(|m| clock(m.start)).unwrap_or_default(),
            summary: format!(
                "Attempts ended per minute over the last {} minutes: {completed} completed, \
                 {failed} failed, {other} released, lost or cancelled",
                minutes.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tallest_bar_fills_the_height_and_segments_stack() {
        let minutes = [
            Minute {
                start: 60,
                completed: 3,
                failed: 1,
                other: 0,
            },
            Minute {
                start: 120,
                completed: 0,
                failed: 0,
                other: 0,
            },
            Minute {
                start: 180,
                completed: 1,
                failed: 0,
                other: 1,
            },
        ];
        let c = Chart::of(&minutes);
        assert_eq!(c.top, 4);
        assert_eq!(
            c.bars[0].segments,
            [(30, 90, "completed"), (0, 30, "failed")]
        );
        assert!(c.bars[1].segments.is_empty());
        assert_eq!(
            c.bars[2].segments,
            [(90, 30, "completed"), (60, 30, "other")]
        );
        assert_eq!(c.bars[0].title, "00:01: 3 completed, 1 failed, 0 other");
        assert!(
            c.summary.contains("4 completed, 1 failed, 1 released"),
            "{}",
            c.summary
        );
        assert_eq!((c.first.as_str(), c.last.as_str()), ("00:01", "00:03"));
        let empty = Chart::of(&[]);
        assert_eq!((empty.top, empty.bars.len()), (0, 0));
    }
}
