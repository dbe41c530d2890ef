//! Parsing of the attribute arguments (`target = "t", conf("k" = "v"), ...`).
//!
//! Parsing continues after most mistakes so that one compilation reports
//! every wrong key or value at once.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Lit, LitBool, LitStr, Token};

use crate::kind::{suggest, MacroKind};

/// Accumulated compile errors.
#[derive(Default)]
pub(crate) struct Errors(Vec<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, e: syn::Error) {
        self.0.push(e);
    }

    pub(crate) fn at(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(syn::Error::new(span, msg));
    }

    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, msg));
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.0.iter().map(syn::Error::to_compile_error).collect()
    }
}

/// Everything the attribute said, as written (literals keep their spans).
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) target: Option<LitStr>,
    pub(crate) name: Option<LitStr>,
    pub(crate) once: Option<LitBool>,
    pub(crate) comment: Option<LitStr>,
    pub(crate) conf: Vec<(LitStr, LitStr)>,
    pub(crate) import_checkpoint: Option<LitStr>,
    pub(crate) format: Option<LitStr>,
    pub(crate) path: Option<LitStr>,
    pub(crate) partition_cols: Vec<LitStr>,
    pub(crate) schema: Option<LitStr>,
    pub(crate) quarantine: Option<LitStr>,
}

/// Parses the attribute's arguments for `kind`; problems go to `errors`.
pub(crate) fn parse(kind: MacroKind, attr: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let mut seen: HashSet<String> = HashSet::new();
    let parser = syn::meta::parser(|meta| {
        let key = match meta.path.get_ident() {
            Some(ident) => ident.unraw().to_string(),
            None => meta.path.to_token_stream().to_string().replace(' ', ""),
        };
        if !kind.keys().contains(&key.as_str()) {
            let value = skip_value(&meta)?;
            if let Some(msg) = kind.rejection(&key) {
                let mut tokens = meta.path.to_token_stream();
                tokens.extend(value);
                errors.spanned(tokens, msg);
            } else {
                let hint = suggest(&key, kind.keys())
                    .map(|close| format!("\ndid you mean `{close}`?"))
                    .unwrap_or_default();
                errors.spanned(
                    &meta.path,
                    format!(
                        "unknown key `{key}` for #[{}]; expected one of: {}{hint}",
                        kind.name(),
                        kind.keys().join(", ")
                    ),
                );
            }
            return Ok(());
        }
        if !seen.insert(key.clone()) {
            skip_value(&meta)?;
            errors.spanned(&meta.path, format!("duplicate key `{key}`"));
            return Ok(());
        }
        match key.as_str() {
            "target" => args.target = string(&meta, &key, "\"events\"", errors)?,
            "name" => args.name = string(&meta, &key, "\"my_flow\"", errors)?,
            "comment" => {
                args.comment = string_allow_empty(&meta, &key, "\"what it holds\"", errors)?;
            }
            "import_checkpoint" => {
                args.import_checkpoint = string(&meta, &key, "\"/path/to/checkpoint\"", errors)?;
            }
            "format" => args.format = string(&meta, &key, "\"delta\"", errors)?,
            "path" => args.path = string(&meta, &key, "\"/data/events\"", errors)?,
            "schema" => args.schema = string(&meta, &key, "\"ts TIMESTAMP, id STRING\"", errors)?,
            "quarantine" => args.quarantine = string(&meta, &key, "\"bad_orders\"", errors)?,
            "once" => args.once = boolean(&meta, &key, errors)?,
            "partition_cols" => args.partition_cols = string_list(&meta, &key, errors)?,
            "conf" => args.conf = conf(&meta, errors)?,
            other => unreachable!("key `{other}` listed but not handled"),
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(attr) {
        errors.push(e);
    }
    args
}

/// Consumes whatever follows a key we are not going to use: `= expr`,
/// `( ... )` or nothing. Returns the consumed tokens.
pub(crate) fn skip_value(meta: &ParseNestedMeta) -> syn::Result<TokenStream> {
    let input = meta.input;
    if input.peek(Token![=]) {
        let eq: Token![=] = input.parse()?;
        let value: Expr = input.parse()?;
        let mut tokens = eq.to_token_stream();
        value.to_tokens(&mut tokens);
        Ok(tokens)
    } else if input.peek(syn::token::Paren) {
        let group: proc_macro2::TokenTree = input.parse()?;
        Ok(group.into_token_stream())
    } else {
        Ok(TokenStream::new())
    }
}

/// `= <expr>`. A missing `=` is reported in `errors` (naming the key) and
/// gives `None`; only syntax errors, after which parsing cannot go on, are
/// returned as `Err`.
pub(crate) fn value_expr(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Option<Expr>> {
    if !meta.input.peek(Token![=]) {
        skip_value(meta)?;
        errors.spanned(
            &meta.path,
            format!("`{key}` needs a value: `{key} = {example}`"),
        );
        return Ok(None);
    }
    let expr: Expr = meta.value()?.parse()?;
    Ok(Some(ungroup(expr)))
}

/// Strips the invisible groups `macro_rules!` puts around `$x:expr`.
pub(crate) fn ungroup(expr: Expr) -> Expr {
    match expr {
        Expr::Group(g) => ungroup(*g.expr),
        other => other,
    }
}

pub(crate) fn string(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Option<LitStr>> {
    let lit = string_allow_empty(meta, key, example, errors)?;
    if let Some(lit) = &lit {
        if lit.value().trim().is_empty() {
            errors.spanned(lit, format!("`{key}` must not be empty"));
            return Ok(None);
        }
    }
    Ok(lit)
}

pub(crate) fn string_allow_empty(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Option<LitStr>> {
    match value_expr(meta, key, example, errors)? {
        Some(Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        })) => Ok(Some(s)),
        Some(other) => {
            errors.spanned(
                &other,
                format!("`{key}` expects a string literal, e.g. `{key} = {example}`"),
            );
            Ok(None)
        }
        None => Ok(None),
    }
}

fn boolean(meta: &ParseNestedMeta, key: &str, errors: &mut Errors) -> syn::Result<Option<LitBool>> {
    match value_expr(meta, key, "true", errors)? {
        Some(Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(b), ..
        })) => Ok(Some(b)),
        Some(other) => {
            errors.spanned(
                &other,
                format!("`{key}` expects `true` or `false`, e.g. `{key} = true`"),
            );
            Ok(None)
        }
        None => Ok(None),
    }
}

/// `partition_cols = ["a", "b"]`.
pub(crate) fn string_list(
    meta: &ParseNestedMeta,
    key: &str,
    errors: &mut Errors,
) -> syn::Result<Vec<LitStr>> {
    string_list_like(meta, key, "[\"day\", \"country\"]", errors)
}

/// A list of column names; `example` is shown when it is not one.
pub(crate) fn string_list_like(
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Vec<LitStr>> {
    let Some(expr) = value_expr(meta, key, example, errors)? else {
        return Ok(Vec::new());
    };
    let Expr::Array(array) = expr else {
        errors.spanned(
            &expr,
            format!("`{key}` expects a list of column names, e.g. `{key} = {example}`"),
        );
        return Ok(Vec::new());
    };
    let mut out: Vec<LitStr> = Vec::new();
    for elem in array.elems {
        match ungroup(elem) {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => {
                if s.value().trim().is_empty() {
                    errors.spanned(&s, "column names must not be empty");
                } else if out.iter().any(|o| o.value() == s.value()) {
                    errors.spanned(&s, format!("duplicate column `{}`", s.value()));
                } else {
                    out.push(s);
                }
            }
            other => errors.spanned(
                &other,
                format!("`{key}` lists column names as string literals, e.g. `{key} = {example}`"),
            ),
        }
    }
    Ok(out)
}

/// `conf("pipelines.trigger" = "RealTime", "k2" = "v2")`.
pub(crate) fn conf(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
) -> syn::Result<Vec<(LitStr, LitStr)>> {
    let usage = "`conf` takes a parenthesised list of settings: \
                 `conf(\"pipelines.trigger\" = \"RealTime\")`";
    if !meta.input.peek(syn::token::Paren) {
        let value = skip_value(meta)?;
        let mut tokens = meta.path.to_token_stream();
        tokens.extend(value);
        errors.spanned(tokens, usage);
        return Ok(Vec::new());
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let mut out: Vec<(LitStr, LitStr)> = Vec::new();
    while !content.is_empty() {
        if let Some((k, v)) = conf_entry(&content, errors)? {
            if k.value().trim().is_empty() {
                errors.spanned(&k, "conf keys must not be empty");
            } else if out.iter().any(|(o, _)| o.value() == k.value()) {
                errors.spanned(&k, format!("duplicate conf key `{}`", k.value()));
            } else {
                out.push((k, v));
            }
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(out)
}

/// One `"key" = "value"` pair of `conf(...)` (parsed as an assignment expression).
fn conf_entry(input: ParseStream, errors: &mut Errors) -> syn::Result<Option<(LitStr, LitStr)>> {
    let usage = "conf entries are `\"key\" = \"value\"` pairs, \
                 e.g. `conf(\"pipelines.trigger\" = \"RealTime\")`";
    let assign = match ungroup(input.parse::<Expr>()?) {
        Expr::Assign(assign) => assign,
        other => return Err(syn::Error::new_spanned(other, usage)),
    };
    let key = match ungroup(*assign.left) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s),
        other => {
            errors.spanned(
                &other,
                "conf keys are string literals: `conf(\"pipelines.trigger\" = \"RealTime\")`",
            );
            None
        }
    };
    let value = match ungroup(*assign.right) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s),
        Expr::Lit(syn::ExprLit {
            lit: lit @ (Lit::Int(_) | Lit::Float(_) | Lit::Bool(_)),
            ..
        }) => {
            let text = lit.to_token_stream().to_string();
            errors.spanned(&lit, format!("conf values are strings: write `\"{text}\"`"));
            None
        }
        other => {
            errors.spanned(&other, "conf values are string literals");
            None
        }
    };
    Ok(key.zip(value))
}
