//! A renderer for the subset of Helm's templating that `deploy/chart` uses, so tests can render
//! the chart without the `helm` binary: `{{ }}` actions with `-` trimming, `if`/`else`, `with`,
//! `range $k, $v := ...`, `define`, `$var := ...`, pipelines with parentheses, and the functions
//! `include tpl toYaml nindent indent quote default trunc trimSuffix eq ne gt lt not and or len
//! int`. Anything else is an error naming it, so the chart cannot silently outgrow the renderer.
//! Values merge like Helm's: maps deeply, anything else replaced, `null` removes a key.

// Shared by several test crates, each using a part.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value, json};

type Result<T> = std::result::Result<T, String>;

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Output(Pipe),
    Assign(String, Pipe),
    If(Pipe, Vec<Node>, Vec<Node>),
    With(Pipe, Vec<Node>, Vec<Node>),
    Range(Option<(String, String)>, Pipe, Vec<Node>),
}

type Pipe = Vec<Vec<Operand>>;

#[derive(Debug, Clone)]
enum Operand {
    Field(Option<String>, Vec<String>),
    Str(String),
    Int(i64),
    Literal(Value),
    Sub(Pipe),
    Func(String),
}

/// A chart directory: its templates, parsed, and its defaults.
#[derive(Debug)]
pub struct Chart {
    defines: HashMap<String, Vec<Node>>,
    templates: Vec<(String, Vec<Node>)>,
    defaults: Value,
    chart: Value,
}

impl Chart {
    pub fn load(dir: &Path) -> Result<Chart> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        let meta: Value =
            serde_yaml::from_str(&read(&dir.join("Chart.yaml"))?).map_err(|e| e.to_string())?;
        let defaults: Value =
            serde_yaml::from_str(&read(&dir.join("values.yaml"))?).map_err(|e| e.to_string())?;
        let mut files: Vec<_> = std::fs::read_dir(dir.join("templates"))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        let mut defines = HashMap::new();
        let mut templates = Vec::new();
        for file in files {
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let nodes = parse(&read(&file)?, &mut defines).map_err(|e| format!("{name}: {e}"))?;
            if !name.starts_with('_') && (name.ends_with(".yaml") || name.ends_with(".yml")) {
                templates.push((name, nodes));
            }
        }
        let chart = json!({
            "Name": meta["name"],
            "Version": meta["version"],
            "AppVersion": meta["appVersion"],
        });
        Ok(Chart {
            defines,
            templates,
            defaults,
            chart,
        })
    }

    /// The default values merged with `overrides`, as Helm merges a values file.
    pub fn values(&self, overrides: &Value) -> Value {
        let mut values = self.defaults.clone();
        merge(&mut values, overrides);
        values
    }

    /// Every object the chart renders for `overrides` (`helm template RELEASE -n NAMESPACE`).
    pub fn render(&self, release: &str, namespace: &str, overrides: &Value) -> Result<Vec<Value>> {
        let root = json!({
            "Values": self.values(overrides),
            "Release": { "Name": release, "Namespace": namespace },
            "Chart": self.chart,
        });
        let mut objects = Vec::new();
        for (name, nodes) in &self.templates {
            let text = self
                .exec(nodes, &root, &root, &mut Vec::new())
                .map_err(|e| format!("{name}: {e}"))?;
            let doc: Value = serde_yaml::from_str(&text)
                .map_err(|e| format!("{name} renders invalid YAML: {e}\n{text}"))?;
            if !doc.is_null() {
                objects.push(doc);
            }
        }
        Ok(objects)
    }

    fn exec(
        &self,
        nodes: &[Node],
        dot: &Value,
        root: &Value,
        vars: &mut Vec<(String, Value)>,
    ) -> Result<String> {
        let mut out = String::new();
        let mark = vars.len();
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Output(p) => out.push_str(&print(&self.eval(p, dot, root, vars)?)),
                Node::Assign(name, p) => {
                    let v = self.eval(p, dot, root, vars)?;
                    vars.push((name.clone(), v));
                }
                Node::If(p, then, other) => {
                    let branch = if truthy(&self.eval(p, dot, root, vars)?) {
                        then
                    } else {
                        other
                    };
                    out.push_str(&self.exec(branch, dot, root, vars)?);
                }
                Node::With(p, then, other) => {
                    let v = self.eval(p, dot, root, vars)?;
                    if truthy(&v) {
                        out.push_str(&self.exec(then, &v, root, vars)?);
                    } else {
                        out.push_str(&self.exec(other, dot, root, vars)?);
                    }
                }
                Node::Range(names, p, body) => {
                    let items: Vec<(Value, Value)> = match self.eval(p, dot, root, vars)? {
                        Value::Object(m) => {
                            let mut keys: Vec<_> = m.keys().cloned().collect();
                            keys.sort();
                            keys.into_iter()
                                .map(|k| (Value::String(k.clone()), m[&k].clone()))
                                .collect()
                        }
                        Value::Array(a) => a
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (json!(i), v))
                            .collect(),
                        Value::Null => Vec::new(),
                        other => return Err(format!("range over {other}")),
                    };
                    for (k, v) in items {
                        let inner = vars.len();
                        if let Some((kn, vn)) = names {
                            vars.push((kn.clone(), k));
                            vars.push((vn.clone(), v.clone()));
                        }
                        out.push_str(&self.exec(body, &v, root, vars)?);
                        vars.truncate(inner);
                    }
                }
            }
        }
        vars.truncate(mark);
        Ok(out)
    }

    fn eval(
        &self,
        pipe: &Pipe,
        dot: &Value,
        root: &Value,
        vars: &mut Vec<(String, Value)>,
    ) -> Result<Value> {
        let mut piped: Option<Value> = None;
        for cmd in pipe {
            let (first, rest) = cmd.split_first().ok_or("empty command")?;
            let value = if let Operand::Func(name) = first {
                let mut args = Vec::new();
                for a in rest {
                    args.push(self.operand(a, dot, root, vars)?);
                }
                args.extend(piped.take());
                self.call(name, args)?
            } else {
                if !rest.is_empty() || piped.is_some() {
                    return Err(format!("{first:?} is not a function"));
                }
                self.operand(first, dot, root, vars)?
            };
            piped = Some(value);
        }
        piped.ok_or_else(|| "empty pipeline".to_owned())
    }

    fn operand(
        &self,
        op: &Operand,
        dot: &Value,
        root: &Value,
        vars: &mut Vec<(String, Value)>,
    ) -> Result<Value> {
        Ok(match op {
            Operand::Field(var, path) => {
                let base = match var.as_deref() {
                    None => dot.clone(),
                    Some("$") => root.clone(),
                    Some(name) => vars
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .ok_or(format!("undefined variable {name}"))?,
                };
                path.iter()
                    .fold(base, |v, key| v.get(key).cloned().unwrap_or(Value::Null))
            }
            Operand::Str(s) => Value::String(s.clone()),
            Operand::Int(i) => json!(i),
            Operand::Literal(v) => v.clone(),
            Operand::Sub(p) => self.eval(p, dot, root, vars)?,
            Operand::Func(name) => self.call(name, Vec::new())?,
        })
    }

    fn call(&self, name: &str, args: Vec<Value>) -> Result<Value> {
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!("{name} takes {n} arguments, got {}", args.len()))
            }
        };
        let int = |v: &Value| -> Result<i64> {
            match v {
                Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_f64().map(|f| f as i64))
                    .ok_or(format!("{name}: bad number {n}")),
                Value::String(s) => s
                    .parse()
                    .map_err(|_| format!("{name}: {s:?} is not a number")),
                Value::Null => Ok(0),
                other => Err(format!("{name}: {other} is not a number")),
            }
        };
        Ok(match name {
            "include" => {
                arity(2)?;
                let template = args[0].as_str().ok_or("include: name must be a string")?;
                let nodes = self
                    .defines
                    .get(template)
                    .ok_or(format!("include: no template {template:?}"))?;
                Value::String(self.exec(nodes, &args[1], &args[1], &mut Vec::new())?)
            }
            "tpl" => {
                arity(2)?;
                let nodes = parse(&print(&args[0]), &mut HashMap::new())?;
                Value::String(self.exec(&nodes, &args[1], &args[1], &mut Vec::new())?)
            }
            "toYaml" => {
                arity(1)?;
                let text = serde_yaml::to_string(&args[0]).map_err(|e| e.to_string())?;
                Value::String(text.trim_end().to_owned())
            }
            "nindent" | "indent" => {
                arity(2)?;
                let pad = " ".repeat(usize::try_from(int(&args[0])?).map_err(|e| e.to_string())?);
                let text = print(&args[1])
                    .lines()
                    .map(|l| format!("{pad}{l}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                Value::String(if name == "nindent" {
                    format!("\n{text}")
                } else {
                    text
                })
            }
            "quote" => {
                arity(1)?;
                Value::String(serde_json::to_string(&print(&args[0])).map_err(|e| e.to_string())?)
            }
            "default" => {
                arity(2)?;
                if truthy(&args[1]) {
                    args[1].clone()
                } else {
                    args[0].clone()
                }
            }
            "trunc" => {
                arity(2)?;
                let n = usize::try_from(int(&args[0])?).map_err(|e| e.to_string())?;
                Value::String(print(&args[1]).chars().take(n).collect())
            }
            "trimSuffix" => {
                arity(2)?;
                let (suffix, s) = (print(&args[0]), print(&args[1]));
                Value::String(s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_owned())
            }
            "eq" | "ne" => {
                arity(2)?;
                let same = match (&args[0], &args[1]) {
                    (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
                    (a, b) => a == b,
                };
                Value::Bool(same == (name == "eq"))
            }
            "gt" | "lt" => {
                arity(2)?;
                let (a, b) = (int(&args[0])?, int(&args[1])?);
                Value::Bool(if name == "gt" { a > b } else { a < b })
            }
            "not" => {
                arity(1)?;
                Value::Bool(!truthy(&args[0]))
            }
            "and" => args
                .iter()
                .find(|v| !truthy(v))
                .or(args.last())
                .cloned()
                .unwrap_or(Value::Null),
            "or" => args
                .iter()
                .find(|v| truthy(v))
                .or(args.last())
                .cloned()
                .unwrap_or(Value::Null),
            "len" => {
                arity(1)?;
                json!(match &args[0] {
                    Value::Object(m) => m.len(),
                    Value::Array(a) => a.len(),
                    Value::String(s) => s.len(),
                    Value::Null => 0,
                    other => return Err(format!("len of {other}")),
                })
            }
            "int" => {
                arity(1)?;
                json!(int(&args[0])?)
            }
            other => {
                return Err(format!(
                    "function {other:?} is not supported by the test renderer"
                ));
            }
        })
    }
}

/// Helm's merge of a values file over the defaults.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(existing) =
                    b.get_mut(k).filter(|e| e.is_object() && v.is_object())
                {
                    merge(existing, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

fn print(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

enum Token {
    Text(String),
    Action(String),
}

fn lex(src: &str) -> Result<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while !rest.is_empty() {
        let Some(open) = rest.find("{{") else {
            let text = if trim_next { rest.trim_start() } else { rest };
            tokens.push(Token::Text(text.to_owned()));
            break;
        };
        let mut text = &rest[..open];
        if trim_next {
            text = text.trim_start();
        }
        let mut inner = &rest[open + 2..];
        if inner.starts_with("- ") {
            text = text.trim_end();
            inner = &inner[2..];
        }
        tokens.push(Token::Text(text.to_owned()));
        let close = inner.find("}}").ok_or("unclosed {{")?;
        let mut action = &inner[..close];
        trim_next = action.ends_with(" -");
        if trim_next {
            action = &action[..action.len() - 2];
        }
        tokens.push(Token::Action(action.trim().to_owned()));
        rest = &inner[close + 2..];
    }
    Ok(tokens)
}

enum Boundary {
    Eof,
    End,
    Else,
}

fn parse(src: &str, defines: &mut HashMap<String, Vec<Node>>) -> Result<Vec<Node>> {
    let tokens = lex(src)?;
    let mut pos = 0;
    let (nodes, end) = parse_list(&tokens, &mut pos, defines)?;
    match end {
        Boundary::Eof => Ok(nodes),
        _ => Err("unexpected end/else".into()),
    }
}

fn parse_list(
    tokens: &[Token],
    pos: &mut usize,
    defines: &mut HashMap<String, Vec<Node>>,
) -> Result<(Vec<Node>, Boundary)> {
    let mut nodes = Vec::new();
    while let Some(token) = tokens.get(*pos) {
        *pos += 1;
        let action = match token {
            Token::Text(t) => {
                nodes.push(Node::Text(t.clone()));
                continue;
            }
            Token::Action(a) => a.as_str(),
        };
        let block = |pos: &mut usize,
                     defines: &mut HashMap<String, Vec<Node>>,
                     allow_else: bool|
         -> Result<(Vec<Node>, Vec<Node>)> {
            let (then, end) = parse_list(tokens, pos, defines)?;
            match end {
                Boundary::End => Ok((then, Vec::new())),
                Boundary::Else if allow_else => match parse_list(tokens, pos, defines)? {
                    (other, Boundary::End) => Ok((then, other)),
                    _ => Err("else without end".into()),
                },
                _ => Err(format!("unterminated block after {{{{ {action} }}}}")),
            }
        };
        if action == "end" {
            return Ok((nodes, Boundary::End));
        } else if action == "else" {
            return Ok((nodes, Boundary::Else));
        } else if let Some(cond) = action.strip_prefix("if ") {
            let (then, other) = block(pos, defines, true)?;
            nodes.push(Node::If(parse_pipe(cond)?, then, other));
        } else if let Some(cond) = action.strip_prefix("with ") {
            let (then, other) = block(pos, defines, true)?;
            nodes.push(Node::With(parse_pipe(cond)?, then, other));
        } else if let Some(spec) = action.strip_prefix("range ") {
            let (names, pipe) = match spec.split_once(":=") {
                Some((vars, pipe)) => {
                    let (k, v) = vars.split_once(',').ok_or("range needs $key, $value")?;
                    (Some((k.trim().to_owned(), v.trim().to_owned())), pipe)
                }
                None => (None, spec),
            };
            let (body, _) = block(pos, defines, false)?;
            nodes.push(Node::Range(names, parse_pipe(pipe)?, body));
        } else if let Some(name) = action.strip_prefix("define ") {
            let (body, _) = block(pos, defines, false)?;
            defines.insert(name.trim().trim_matches('"').to_owned(), body);
        } else if let Some((var, pipe)) = action
            .split_once(":=")
            .filter(|(v, _)| v.trim().starts_with('$'))
        {
            nodes.push(Node::Assign(var.trim().to_owned(), parse_pipe(pipe)?));
        } else {
            nodes.push(Node::Output(parse_pipe(action)?));
        }
    }
    Ok((nodes, Boundary::Eof))
}

fn parse_pipe(src: &str) -> Result<Pipe> {
    let words = split_words(src)?;
    let mut pos = 0;
    let pipe = pipe_of(&words, &mut pos)?;
    if pos != words.len() {
        return Err(format!("unexpected {:?} in {src:?}", words[pos]));
    }
    Ok(pipe)
}

fn split_words(src: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = src.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if "()|".contains(c) {
            words.push(c.to_string());
            chars.next();
        } else if c == '"' {
            let mut word = String::from('"');
            chars.next();
            loop {
                let c = chars.next().ok_or("unterminated string")?;
                word.push(c);
                if c == '\\' {
                    word.push(chars.next().ok_or("unterminated string")?);
                } else if c == '"' {
                    break;
                }
            }
            words.push(word);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars
                .peek()
                .filter(|c| !c.is_whitespace() && !"()|\"".contains(**c))
            {
                word.push(c);
                chars.next();
            }
            words.push(word);
        }
    }
    Ok(words)
}

fn pipe_of(words: &[String], pos: &mut usize) -> Result<Pipe> {
    let mut pipe = vec![Vec::new()];
    while let Some(word) = words.get(*pos) {
        match word.as_str() {
            ")" => break,
            "|" => {
                *pos += 1;
                pipe.push(Vec::new());
                continue;
            }
            _ => {}
        }
        *pos += 1;
        let operand = match word.as_str() {
            "(" => {
                let inner = pipe_of(words, pos)?;
                if words.get(*pos).map(String::as_str) != Some(")") {
                    return Err("missing )".into());
                }
                *pos += 1;
                Operand::Sub(inner)
            }
            "nil" => Operand::Literal(Value::Null),
            "true" => Operand::Literal(Value::Bool(true)),
            "false" => Operand::Literal(Value::Bool(false)),
            w if w.starts_with('"') => {
                Operand::Str(serde_json::from_str(w).map_err(|e| format!("{w}: {e}"))?)
            }
            w if w.starts_with('.') || w.starts_with('$') => {
                let (var, path) = match w.strip_prefix('$') {
                    Some(rest) => {
                        let (name, path) = rest.split_once('.').unwrap_or((rest, ""));
                        (Some(format!("${name}")), path)
                    }
                    None => (None, &w[1..]),
                };
                Operand::Field(
                    var,
                    path.split('.')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                )
            }
            w => match w.parse::<i64>() {
                Ok(i) => Operand::Int(i),
                Err(_) => Operand::Func(w.to_owned()),
            },
        };
        pipe.last_mut().ok_or("empty pipe")?.push(operand);
    }
    Ok(pipe)
}

/// The objects of a multi-document YAML file (empty documents skipped).
pub fn documents(text: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// `objects` keyed by "Kind/name", for comparisons that ignore document order.
pub fn by_kind_and_name(objects: &[Value]) -> Map<String, Value> {
    objects
        .iter()
        .map(|o| {
            let key = format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, o.clone())
        })
        .collect()
}
