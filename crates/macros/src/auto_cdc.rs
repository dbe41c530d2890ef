//! `create_auto_cdc_flow!(...)`: the keywords of Python's
//! `create_auto_cdc_flow`, as `key = value` pairs, into one
//! `inventory::submit!` of an `AutoCdcDecl`.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::{Expr, Lit, LitInt, LitStr};

use crate::args::{self, Errors};
use crate::kind::suggest;

const KEYS: &[&str] = &[
    "target",
    "source",
    "keys",
    "sequence_by",
    "apply_as_deletes",
    "apply_as_truncates",
    "column_list",
    "except_column_list",
    "stored_as_scd_type",
    "track_history_column_list",
    "track_history_except_column_list",
    "name",
    "comment",
    "conf",
];

#[derive(Default)]
struct CdcArgs {
    target: Option<LitStr>,
    source: Option<LitStr>,
    keys: Option<Vec<LitStr>>,
    sequence_by: Option<LitStr>,
    apply_as_deletes: Option<LitStr>,
    apply_as_truncates: Option<LitStr>,
    column_list: Option<Vec<LitStr>>,
    except_column_list: Option<Vec<LitStr>>,
    stored_as_scd_type: Option<LitInt>,
    track_history_column_list: Option<Vec<LitStr>>,
    track_history_except_column_list: Option<Vec<LitStr>>,
    name: Option<LitStr>,
    comment: Option<LitStr>,
    conf: Vec<(LitStr, LitStr)>,
}

/// Expands `create_auto_cdc_flow!(args)` called on line `line`.
pub(crate) fn expand(input: TokenStream, line: u32) -> TokenStream {
    let mut errors = Errors::default();
    let mut a = CdcArgs::default();
    let mut seen: HashSet<String> = HashSet::new();
    let parser = syn::meta::parser(|meta| {
        let key = match meta.path.get_ident() {
            Some(ident) => ident.unraw().to_string(),
            None => meta.path.to_token_stream().to_string().replace(' ', ""),
        };
        if !KEYS.contains(&key.as_str()) {
            args::skip_value(&meta)?;
            let hint = suggest(&key, KEYS)
                .map(|close| format!("\ndid you mean `{close}`?"))
                .unwrap_or_default();
            errors.spanned(
                &meta.path,
                format!(
                    "unknown key `{key}` for create_auto_cdc_flow!; expected one of: {}{hint}",
                    KEYS.join(", ")
                ),
            );
            return Ok(());
        }
        if !seen.insert(key.clone()) {
            args::skip_value(&meta)?;
            errors.spanned(&meta.path, format!("duplicate key `{key}`"));
            return Ok(());
        }
        let e = &mut errors;
        match key.as_str() {
            "target" => a.target = args::string(&meta, &key, "\"customers\"", e)?,
            "source" => a.source = args::string(&meta, &key, "\"customers_cdc\"", e)?,
            "sequence_by" => a.sequence_by = args::string(&meta, &key, "\"seq\"", e)?,
            "apply_as_deletes" => {
                a.apply_as_deletes = args::string(&meta, &key, "\"operation = 'DELETE'\"", e)?
            }
            "apply_as_truncates" => {
                a.apply_as_truncates = args::string(&meta, &key, "\"operation = 'TRUNCATE'\"", e)?
            }
            "name" => a.name = args::string(&meta, &key, "\"customers_cdc_flow\"", e)?,
            "comment" => a.comment = args::string_allow_empty(&meta, &key, "\"...\"", e)?,
            "keys" => a.keys = Some(args::string_list_like(&meta, &key, "[\"id\"]", e)?),
            "column_list" => {
                a.column_list = Some(args::string_list_like(
                    &meta,
                    &key,
                    "[\"name\", \"city\"]",
                    e,
                )?)
            }
            "except_column_list" => {
                a.except_column_list = Some(args::string_list_like(
                    &meta,
                    &key,
                    "[\"name\", \"city\"]",
                    e,
                )?)
            }
            "track_history_column_list" => {
                a.track_history_column_list = Some(args::string_list_like(
                    &meta,
                    &key,
                    "[\"name\", \"city\"]",
                    e,
                )?)
            }
            "track_history_except_column_list" => {
                a.track_history_except_column_list = Some(args::string_list_like(
                    &meta,
                    &key,
                    "[\"name\", \"city\"]",
                    e,
                )?)
            }
            "stored_as_scd_type" => {
                match args::value_expr(&meta, &key, "2", e)?.map(args::ungroup) {
                    Some(Expr::Lit(syn::ExprLit {
                        lit: Lit::Int(i), ..
                    })) if matches!(i.base10_digits(), "1" | "2") => a.stored_as_scd_type = Some(i),
                    Some(other) => e.spanned(
                        &other,
                        "`stored_as_scd_type` is 1 (latest value per key) or 2 (every version)",
                    ),
                    None => {}
                }
            }
            "conf" => a.conf = args::conf(&meta, e)?,
            other => unreachable!("key `{other}` listed but not handled"),
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(input) {
        errors.push(e);
    }
    let missing: Vec<String> = [
        (a.target.is_some(), "target = \"customers\""),
        (a.source.is_some(), "source = \"customers_cdc\""),
        (
            a.keys.as_ref().is_some_and(|k| !k.is_empty()),
            "keys = [\"id\"]",
        ),
        (a.sequence_by.is_some(), "sequence_by = \"seq\""),
    ]
    .into_iter()
    .filter(|(present, _)| !present)
    .map(|(_, example)| format!("`{example}`"))
    .collect();
    if !missing.is_empty() && errors.is_empty() {
        errors.at(
            Span::call_site(),
            format!("create_auto_cdc_flow! needs {}", missing.join(" and ")),
        );
    }
    if !errors.is_empty() {
        return errors.to_compile_errors();
    }
    let opt = |s: &Option<LitStr>| match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    };
    let list = |l: &Option<Vec<LitStr>>| match l {
        Some(l) => quote!(::core::option::Option::Some(&[#(#l),*])),
        None => quote!(::core::option::Option::None),
    };
    let target = &a.target;
    let source = &a.source;
    let keys = a.keys.clone().unwrap_or_default();
    let sequence_by = &a.sequence_by;
    let name = opt(&a.name);
    let comment = opt(&a.comment);
    let deletes = opt(&a.apply_as_deletes);
    let truncates = opt(&a.apply_as_truncates);
    let column_list = list(&a.column_list);
    let except_column_list = list(&a.except_column_list);
    let track = list(&a.track_history_column_list);
    let track_except = list(&a.track_history_except_column_list);
    let scd = match &a.stored_as_scd_type {
        Some(i) => {
            let v: u8 = i.base10_parse().unwrap_or(1);
            quote!(::core::option::Option::Some(#v))
        }
        None => quote!(::core::option::Option::None),
    };
    let conf = a.conf.iter().map(|(k, v)| quote!((#k, #v)));
    quote! {
        ::pipelines::__private::inventory::submit! {
            ::pipelines::__private::AutoCdcDecl {
                target: #target,
                source: #source,
                name: #name,
                keys: &[#(#keys),*],
                sequence_by: #sequence_by,
                apply_as_deletes: #deletes,
                apply_as_truncates: #truncates,
                column_list: #column_list,
                except_column_list: #except_column_list,
                stored_as_scd_type: #scd,
                track_history_column_list: #track,
                track_history_except_column_list: #track_except,
                conf: &[#(#conf),*],
                comment: #comment,
                location: ::pipelines::__private::SourceLocation { file: ::core::file!(), line: #line },
            }
        }
    }
}
