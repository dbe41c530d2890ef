//! The expectation attributes (`#[expect]`, `#[expect_or_drop]`, ...).
//!
//! They are read by the dataset/flow macro they are stacked with: that
//! macro removes them from the function and lists them in its declaration
//! ([`take`]). Rust expands outer attributes top to bottom, so one written
//! above the dataset/flow attribute runs first, as a macro of its own; it
//! moves itself just below that attribute ([`restack`]), where the
//! dataset/flow macro then finds it. Either way the expectations keep their
//! source order, which is sorted on the position of their `#`.

use std::collections::HashSet;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::{parse_quote, AttrStyle, Attribute, Expr, Item, Lit, LitStr, Meta, MetaList, Token};

use crate::args::{ungroup, Errors};
use crate::kind::MacroKind;

/// Which expectation attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpectMacro {
    Expect,
    ExpectOrDrop,
    ExpectOrFail,
    ExpectAll,
    ExpectAllOrDrop,
    ExpectAllOrFail,
}

impl ExpectMacro {
    /// Every expectation attribute, in the order they are documented.
    const ALL: [ExpectMacro; 6] = [
        ExpectMacro::Expect,
        ExpectMacro::ExpectOrDrop,
        ExpectMacro::ExpectOrFail,
        ExpectMacro::ExpectAll,
        ExpectMacro::ExpectAllOrDrop,
        ExpectMacro::ExpectAllOrFail,
    ];

    /// The attribute name, e.g. `expect_or_drop`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ExpectMacro::Expect => "expect",
            ExpectMacro::ExpectOrDrop => "expect_or_drop",
            ExpectMacro::ExpectOrFail => "expect_or_fail",
            ExpectMacro::ExpectAll => "expect_all",
            ExpectMacro::ExpectAllOrDrop => "expect_all_or_drop",
            ExpectMacro::ExpectAllOrFail => "expect_all_or_fail",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The `ExpectationAction` variant of the expectations it declares.
    fn action(self) -> &'static str {
        match self {
            ExpectMacro::Expect | ExpectMacro::ExpectAll => "Warn",
            ExpectMacro::ExpectOrDrop | ExpectMacro::ExpectAllOrDrop => "Drop",
            ExpectMacro::ExpectOrFail | ExpectMacro::ExpectAllOrFail => "Fail",
        }
    }

    /// Whether it takes `name = "condition"` pairs rather than one
    /// `"name", "condition"`.
    fn is_all(self) -> bool {
        matches!(
            self,
            ExpectMacro::ExpectAll | ExpectMacro::ExpectAllOrDrop | ExpectMacro::ExpectAllOrFail
        )
    }

    /// How the arguments are written, for errors.
    fn usage(self) -> String {
        let at = self.name();
        if self.is_all() {
            format!(
                "#[{at}] takes one or more `\"name\" = \"condition\"` pairs: \
                 #[{at}(\"valid_id\" = \"id IS NOT NULL\", positive = \"amount > 0\")]"
            )
        } else {
            format!(
                "#[{at}] takes a name and a SQL condition: \
                 #[{at}(\"valid_id\", \"id IS NOT NULL\")]"
            )
        }
    }
}

/// One expectation read from an attribute.
pub(crate) struct Expectation {
    name: LitStr,
    condition: LitStr,
    /// The `ExpectationAction` variant.
    action: &'static str,
    /// The line of the attribute's `#`.
    line: u32,
}

impl ToTokens for Expectation {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Expectation {
            name,
            condition,
            action,
            line,
        } = self;
        let action = Ident::new(action, Span::call_site());
        tokens.extend(quote! {
            ::pipelines::__private::ExpectationDecl {
                name: #name,
                condition: #condition,
                action: ::pipelines::__private::ExpectationAction::#action,
                line: #line,
            }
        });
    }
}

/// Removes the expectation attributes from `attrs` and returns what they
/// declare, in source order; problems go to `errors`.
pub(crate) fn take(attrs: &mut Vec<Attribute>, errors: &mut Errors) -> Vec<Expectation> {
    let mut found: Vec<((u32, u32), ExpectMacro, Attribute)> = Vec::new();
    let mut kept: Vec<Attribute> = Vec::with_capacity(attrs.len());
    for attr in std::mem::take(attrs) {
        match expectation_macro(&attr) {
            Some(which) => found.push((position(&attr), which, attr)),
            None => kept.push(attr),
        }
    }
    *attrs = kept;
    // The ones written above the dataset/flow attribute were moved below
    // it one by one, each right after it, so they are in reverse order.
    found.sort_by_key(|(at, _, _)| *at);

    let mut out: Vec<Expectation> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    for ((line, _), which, attr) in found {
        if is_bare_expect(which, &attr) {
            // rustc also reports it, as a malformed lint attribute, before
            // any macro runs; this says what to write instead.
            errors.spanned(
                attr.path(),
                "a bare `#[expect(..)]` is Rust's lint attribute; \
                 write the expectation with a path: `#[pipelines::expect(..)]`, \
                 or `#[dp::expect(..)]` after `use pipelines as dp;`",
            );
            continue;
        }
        for (name, condition) in parse(which, &attr, errors) {
            if names.insert(name.value()) {
                out.push(Expectation {
                    name,
                    condition,
                    action: which.action(),
                    line,
                });
            } else {
                errors.spanned(
                    &name,
                    format!(
                        "expectation `{}` is declared twice on this function",
                        name.value()
                    ),
                );
            }
        }
    }
    out
}

/// `#[which(attr)] item` where `which` is written above the dataset/flow
/// attribute: the item with the same attribute, as
/// `#[::pipelines::which(attr)]`, inserted just after that one, or an error
/// if the item has none.
pub(crate) fn restack(which: ExpectMacro, attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut parsed: Item = match syn::parse2(item.clone()) {
        Ok(parsed) => parsed,
        Err(e) => {
            let error = e.to_compile_error();
            return quote!(#item #error);
        }
    };
    if let Some(attrs) = attrs_mut(&mut parsed) {
        if let Some(at) = attrs.iter().position(is_dataset_macro) {
            // Spanned at this attribute (the call site), so the `#` gives
            // the dataset/flow macro this attribute's line.
            let name = Ident::new(which.name(), Span::call_site());
            let moved: Attribute = parse_quote!(#[::pipelines::#name(#attr)]);
            attrs.insert(at + 1, moved);
            return parsed.into_token_stream();
        }
    }
    let error = syn::Error::new(
        Span::call_site(),
        format!(
            "`#[{}]` must be stacked with #[table], #[materialized_view], #[temporary_view], \
             #[append_flow] or #[update_flow] on the same function",
            which.name()
        ),
    )
    .to_compile_error();
    quote!(#item #error)
}

/// The outer attributes of `item`, for the kinds of item that have them.
pub(crate) fn attrs_mut(item: &mut Item) -> Option<&mut Vec<Attribute>> {
    Some(match item {
        Item::Const(i) => &mut i.attrs,
        Item::Enum(i) => &mut i.attrs,
        Item::ExternCrate(i) => &mut i.attrs,
        Item::Fn(i) => &mut i.attrs,
        Item::ForeignMod(i) => &mut i.attrs,
        Item::Impl(i) => &mut i.attrs,
        Item::Macro(i) => &mut i.attrs,
        Item::Mod(i) => &mut i.attrs,
        Item::Static(i) => &mut i.attrs,
        Item::Struct(i) => &mut i.attrs,
        Item::Trait(i) => &mut i.attrs,
        Item::TraitAlias(i) => &mut i.attrs,
        Item::Type(i) => &mut i.attrs,
        Item::Union(i) => &mut i.attrs,
        Item::Use(i) => &mut i.attrs,
        _ => return None,
    })
}

/// Whether `attr` is `#[table]`, `#[pipelines::append_flow(..)]`, ...
fn is_dataset_macro(attr: &Attribute) -> bool {
    matches!(attr.style, AttrStyle::Outer)
        && attr
            .path()
            .segments
            .last()
            .is_some_and(|s| MacroKind::is_macro_name(&s.ident.to_string()))
}

/// The expectation attribute `attr` is, if it is one.
fn expectation_macro(attr: &Attribute) -> Option<ExpectMacro> {
    if !matches!(attr.style, AttrStyle::Outer) {
        return None;
    }
    let path = attr.path();
    let which = ExpectMacro::from_name(&path.segments.last()?.ident.to_string())?;
    // A bare `#[expect(lint)]` is Rust's lint expectation, left in place;
    // ours has a path (`#[dp::expect(..)]`). A bare one starting with a
    // string was meant as ours: taken, to report it.
    if is_bare_expect(which, attr) && !starts_with_string(attr) {
        return None;
    }
    Some(which)
}

/// `#[expect(..)]` without a path, which is also Rust's lint attribute.
fn is_bare_expect(which: ExpectMacro, attr: &Attribute) -> bool {
    which == ExpectMacro::Expect && attr.path().get_ident().is_some()
}

fn starts_with_string(attr: &Attribute) -> bool {
    let Meta::List(list) = &attr.meta else {
        return false;
    };
    list.parse_args_with(|input: ParseStream| -> syn::Result<bool> {
        let string = input.peek(LitStr);
        input.parse::<TokenStream>()?;
        Ok(string)
    })
    .unwrap_or(false)
}

/// Line and column of the attribute's `#`.
fn position(attr: &Attribute) -> (u32, u32) {
    let span = attr.pound_token.span.unwrap();
    let line = u32::try_from(span.line()).unwrap_or(u32::MAX);
    let column = u32::try_from(span.column()).unwrap_or(u32::MAX);
    (line, column)
}

/// The `(name, condition)` pairs of one attribute.
fn parse(which: ExpectMacro, attr: &Attribute, errors: &mut Errors) -> Vec<(LitStr, LitStr)> {
    let usage = which.usage();
    let Meta::List(list) = &attr.meta else {
        errors.spanned(&attr.meta, usage);
        return Vec::new();
    };
    let entries = match list.parse_args_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
        Ok(entries) => entries,
        Err(e) => {
            errors.at(e.span(), usage);
            return Vec::new();
        }
    };
    if entries.is_empty() {
        errors.spanned(list, usage);
        return Vec::new();
    }
    if which.is_all() {
        entries
            .into_iter()
            .filter_map(|entry| pair(entry, &usage, errors))
            .collect()
    } else {
        single(list, entries, &usage, errors).into_iter().collect()
    }
}

/// `"name", "condition"`.
fn single(
    list: &MetaList,
    entries: Punctuated<Expr, Token![,]>,
    usage: &str,
    errors: &mut Errors,
) -> Option<(LitStr, LitStr)> {
    let entries: Vec<Expr> = entries.into_iter().collect();
    let Ok([name, condition]) = <[Expr; 2]>::try_from(entries) else {
        errors.spanned(&list.tokens, usage);
        return None;
    };
    let name = string_or_error(name, usage, errors);
    let condition = string_or_error(condition, usage, errors);
    checked(name?, condition?, errors)
}

/// `"name" = "condition"` or `name = "condition"`.
fn pair(entry: Expr, usage: &str, errors: &mut Errors) -> Option<(LitStr, LitStr)> {
    let assign = match ungroup(entry) {
        Expr::Assign(assign) => assign,
        other => {
            errors.spanned(&other, usage);
            return None;
        }
    };
    let name = match ungroup(*assign.left) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s),
        Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            let ident = p.path.get_ident().expect("checked by the guard");
            Some(LitStr::new(&ident.unraw().to_string(), ident.span()))
        }
        other => {
            errors.spanned(
                &other,
                "expectation names are string literals or identifiers, \
                 e.g. `\"valid_id\" = \"id IS NOT NULL\"` or `valid_id = \"id IS NOT NULL\"`",
            );
            None
        }
    };
    let condition = string_or_error(
        *assign.right,
        "expectation conditions are SQL strings, e.g. `positive = \"amount > 0\"`",
        errors,
    );
    checked(name?, condition?, errors)
}

/// The string literal `expr` is, or `expr` itself (boxed: an `Expr` is large).
fn string(expr: Expr) -> Result<LitStr, Box<Expr>> {
    match ungroup(expr) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s),
        other => Err(Box::new(other)),
    }
}

/// The string literal `expr` is; otherwise `message` at `expr`.
fn string_or_error(expr: Expr, message: &str, errors: &mut Errors) -> Option<LitStr> {
    match string(expr) {
        Ok(s) => Some(s),
        Err(other) => {
            errors.spanned(&other, message);
            None
        }
    }
}

/// The pair, if neither is empty.
fn checked(name: LitStr, condition: LitStr, errors: &mut Errors) -> Option<(LitStr, LitStr)> {
    let mut ok = true;
    if name.value().trim().is_empty() {
        errors.spanned(&name, "expectation names must not be empty");
        ok = false;
    }
    if condition.value().trim().is_empty() {
        errors.spanned(&condition, "expectation conditions must not be empty");
        ok = false;
    }
    ok.then_some((name, condition))
}
