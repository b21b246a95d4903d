//! Terminal output: lines on stdout (colour only when stdout is a terminal and `NO_COLOR` is
//! unset), and a spinner line on stderr only when stderr is a terminal. Writing a stdout line
//! first clears the spinner, so the two never tangle on one screen.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Dim,
    Red,
    Green,
    Bold,
}

fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Whether stdout gets colour.
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && !no_color()
}

fn stderr_color() -> bool {
    std::io::stderr().is_terminal() && !no_color()
}

pub fn paint(text: &str, style: Style, color: bool) -> String {
    let code = match style {
        Style::Plain => return text.to_owned(),
        Style::Dim => "2",
        Style::Red => "31",
        Style::Green => "32",
        Style::Bold => "1",
    };
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Writes lines to stdout (errors such as a closed pipe are ignored).
pub fn print_lines(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// A red line on stderr (red only when stderr is a terminal).
pub fn error_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", paint(text, Style::Red, stderr_color()));
}

/// A plain line on stderr.
pub fn note_line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// A prompt on stderr, without a newline (the user types after it).
pub fn prompt(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

struct SpinnerState {
    status: String,
    frame: usize,
    shown: bool,
    started: Instant,
    running: bool,
    /// Not drawn while the user types an answer.
    paused: bool,
}

/// The screen of one `planwire plan`: stdout lines plus an optional stderr spinner.
#[derive(Clone)]
pub struct Screen {
    pub color: bool,
    spinner: Option<Arc<Mutex<SpinnerState>>>,
}

impl Screen {
    pub fn start() -> Screen {
        let spinner = std::io::stderr().is_terminal().then(|| {
            Arc::new(Mutex::new(SpinnerState {
                status: "Starting…".into(),
                frame: 0,
                shown: false,
                started: Instant::now(),
                running: true,
                paused: false,
            }))
        });
        let screen = Screen {
            color: stdout_color(),
            spinner,
        };
        if let Some(state) = &screen.spinner {
            let state = Arc::downgrade(state);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(TICK);
                loop {
                    tick.tick().await;
                    let Some(state) = state.upgrade() else { return };
                    let mut s = state.lock().expect("spinner");
                    if !s.running {
                        return;
                    }
                    if s.paused {
                        continue;
                    }
                    s.frame = (s.frame + 1) % FRAMES.len();
                    draw(&mut s);
                }
            });
        }
        screen
    }

    /// Sets the spinner's text.
    pub fn status(&self, text: &str) {
        if let Some(state) = &self.spinner {
            let mut s = state.lock().expect("spinner");
            s.status = text.to_owned();
        }
    }

    /// Hides the spinner (while the user types) or lets it draw again.
    pub fn pause(&self, paused: bool) {
        if let Some(state) = &self.spinner {
            let mut s = state.lock().expect("spinner");
            s.paused = paused;
            if paused {
                clear(&mut s);
            }
        }
    }

    /// Writes lines to stdout, clearing the spinner first.
    pub fn lines(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        match &self.spinner {
            Some(state) => {
                let mut s = state.lock().expect("spinner");
                clear(&mut s);
                print_lines(lines);
            }
            None => print_lines(lines),
        }
    }

    /// A line on stderr (clearing the spinner first).
    pub fn note(&self, text: &str) {
        self.with_spinner_cleared(|| note_line(text));
    }

    /// A red line on stderr (clearing the spinner first).
    pub fn error(&self, text: &str) {
        self.with_spinner_cleared(|| error_line(text));
    }

    fn with_spinner_cleared(&self, f: impl FnOnce()) {
        match &self.spinner {
            Some(state) => {
                let mut s = state.lock().expect("spinner");
                clear(&mut s);
                f();
            }
            None => f(),
        }
    }

    /// Stops and erases the spinner for good.
    pub fn finish(&self) {
        if let Some(state) = &self.spinner {
            let mut s = state.lock().expect("spinner");
            s.running = false;
            clear(&mut s);
        }
    }
}

fn draw(s: &mut SpinnerState) {
    let secs = s.started.elapsed().as_secs();
    let width = terminal_width().saturating_sub(12).max(20);
    let status: String = s.status.chars().take(width).collect();
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[2K{} {status} {}",
        paint(FRAMES[s.frame], Style::Bold, stderr_color()),
        paint(&format!("{secs}s"), Style::Dim, stderr_color())
    );
    let _ = err.flush();
    s.shown = true;
}

fn clear(s: &mut SpinnerState) {
    if s.shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
        s.shown = false;
    }
}

fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ fills a plain struct; on failure the default is used.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return ws.ws_col as usize;
        }
    }
    80
}
