//! [`Setting`]: one flag or environment variable, declared once with everything about it (flag
//! name, variable, default, help text, heading, parser), and the `settings!` macro that
//! declares an area's settings and lists them for the command line and the documentation.

use std::fmt::Write as _;

/// How a setting takes its value on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// `--flag VALUE` with a path (an empty path is refused on the command line).
    Path,
    /// An upstream boolean flag: `--flag` alone means true, a value needs `=` (as pflag's).
    Switch,
    /// A comma-separated list; repeating the flag adds to it.
    List,
}

/// Everything about a setting except its parser: what the command line, `--help` and
/// docs/configuration.md are built from.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Long flag name without dashes (also the clap id).
    pub flag: &'static str,
    /// Environment variable, if any.
    pub env: Option<&'static str>,
    /// Short flag.
    pub short: Option<char>,
    /// Hidden other names of the flag.
    pub aliases: &'static [&'static str],
    /// Placeholder of the value in `--help`.
    pub value_name: &'static str,
    /// Default: used when the setting is not given (an environment-backed one also when it is
    /// empty).
    pub default: Option<&'static str>,
    /// Help text, one entry per doc-comment line.
    pub help: &'static [&'static str],
    /// Section of `--help`.
    pub heading: &'static str,
    /// How the value is written.
    pub form: Form,
}

impl Spec {
    /// The name problems use: the variable when the flag is its lower-case spelling, the flag
    /// when there is no variable, else both (`--load-balancer-class/HCLOUD_LOAD_BALANCER_CLASS`).
    pub fn name(&self) -> String {
        let flag = if self.flag.len() == 1 {
            format!("-{}", self.flag)
        } else {
            format!("--{}", self.flag)
        };
        match self.env {
            None => flag,
            Some(env) if env.to_ascii_lowercase().replace('_', "-") == self.flag => env.to_owned(),
            Some(env) => format!("{flag}/{env}"),
        }
    }

    /// The help text: the doc-comment lines joined, without the final period (as clap's derive
    /// shows a one-paragraph doc comment).
    pub fn help_text(&self) -> String {
        let mut text = String::new();
        for line in self.help {
            let line = line.trim();
            if !text.is_empty() && !line.is_empty() {
                text.push(' ');
            }
            text.push_str(line);
        }
        text.strip_suffix('.').map_or(text.clone(), str::to_owned)
    }

    /// The clap argument.
    pub fn arg(&self) -> clap::Arg {
        let mut arg = clap::Arg::new(self.flag)
            .long(self.flag)
            .value_name(self.value_name)
            .help(self.help_text())
            .help_heading(self.heading)
            .aliases(self.aliases.iter().copied());
        if let Some(short) = self.short {
            arg = arg.short(short);
        }
        if let Some(env) = self.env {
            arg = arg.env(env);
        }
        if let Some(default) = self.default {
            arg = arg.default_value(default);
        }
        match self.form {
            Form::Value => arg
                .action(clap::ArgAction::Set)
                .value_parser(clap::value_parser!(String)),
            Form::Path => arg
                .action(clap::ArgAction::Set)
                .value_parser(clap::value_parser!(std::path::PathBuf)),
            Form::Switch => arg
                .action(clap::ArgAction::Set)
                .value_parser(clap::value_parser!(String))
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true"),
            Form::List => arg
                .action(clap::ArgAction::Append)
                .value_parser(clap::value_parser!(String))
                .value_delimiter(','),
        }
    }

    /// The setting's value in `matches` (a list's values joined by commas), if any.
    pub fn value_in(&self, matches: &clap::ArgMatches) -> Option<String> {
        match self.form {
            Form::Value | Form::Switch => matches.get_one::<String>(self.flag).cloned(),
            Form::Path => matches
                .get_one::<std::path::PathBuf>(self.flag)
                .map(|p| p.to_string_lossy().into_owned()),
            Form::List => matches
                .get_many::<String>(self.flag)
                .map(|values| values.cloned().collect::<Vec<_>>().join(",")),
        }
    }

    /// One row of the reference table in docs/configuration.md.
    pub fn table_row(&self) -> String {
        let mut row = String::from("| ");
        match self.env {
            Some(env) => {
                let _ = write!(row, "`{env}`");
            }
            None => row.push('–'),
        }
        let _ = write!(row, " | `{}` | ", self.name_on_command_line());
        match self.default {
            Some("") | None => row.push('–'),
            Some(default) => {
                let _ = write!(row, "`{default}`");
            }
        }
        let _ = write!(row, " | {} |", self.help_text().replace('|', "\\|"));
        row
    }

    fn name_on_command_line(&self) -> String {
        match self.short {
            Some(short) => format!("-{short}"),
            None => format!("--{}", self.flag),
        }
    }
}

/// A [`Spec`] and the parser of its value (which is also its validation: an `Err` is the
/// problem reported under [`Spec::name`]).
#[derive(Debug, Clone, Copy)]
pub struct Setting<T> {
    /// Name, variable, default, help.
    pub spec: Spec,
    /// Parses (and checks) a value.
    pub parse: fn(&str) -> Result<T, String>,
}

/// `Spec` builders, used by the `settings!` declarations.
impl Spec {
    /// A flag without variable (`heading` and `help` are filled by `settings!`).
    pub const fn flag(flag: &'static str, value_name: &'static str) -> Self {
        Spec {
            flag,
            env: None,
            short: None,
            aliases: &[],
            value_name,
            default: None,
            help: &[],
            heading: "",
            form: Form::Value,
        }
    }

    /// An environment variable, also given as the flag of its name in lower case (`flag`).
    pub const fn env(flag: &'static str, env: &'static str, value_name: &'static str) -> Self {
        Spec {
            env: Some(env),
            ..Self::flag(flag, value_name)
        }
    }

    /// With this default.
    pub const fn default(self, default: &'static str) -> Self {
        Spec {
            default: Some(default),
            ..self
        }
    }

    /// Written this way.
    pub const fn form(self, form: Form) -> Self {
        Spec { form, ..self }
    }

    /// Also known by these hidden names.
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Self {
        Spec { aliases, ..self }
    }

    /// With a short flag.
    pub const fn short(self, short: char) -> Self {
        Spec {
            short: Some(short),
            ..self
        }
    }

    /// Read with `parse`.
    pub const fn parse<T>(self, parse: fn(&str) -> Result<T, String>) -> Setting<T> {
        Setting { spec: self, parse }
    }
}

impl<T> Setting<T> {
    /// With its heading and help (by `settings!`).
    pub const fn described(self, heading: &'static str, help: &'static [&'static str]) -> Self {
        Setting {
            spec: Spec {
                heading,
                help,
                ..self.spec
            },
            parse: self.parse,
        }
    }
}

/// Declares an area's settings, each with its doc comment as its help text, and lists them
/// (in `--help` order) as `$list`:
///
/// ```ignore
/// settings! {
///     LIST_NAME, HEADING;
///     /// Help text.
///     pub(super) NAME: Type = Spec::env("flag-name", "VARIABLE", "VALUE").default("x").parse(parser);
/// }
/// ```
macro_rules! settings {
    ($list:ident, $heading:expr; $($(#[doc = $doc:literal])* $vis:vis $name:ident: $ty:ty = $value:expr;)*) => {
        $(
            $(#[doc = $doc])*
            $vis const $name: $crate::config::setting::Setting<$ty> =
                $value.described($heading, &[$($doc),*]);
        )*
        /// The settings of this area, in `--help` order.
        pub(super) const $list: &[&$crate::config::setting::Spec] = &[$(&$name.spec),*];
    };
}
pub(super) use settings;
