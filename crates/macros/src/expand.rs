//! Code generation: the function as written (minus its expectation
//! attributes) plus one `inventory::submit!`.

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, ToTokens};
use syn::ext::IdentExt;
use syn::{FnArg, Item, ItemFn, LitStr, ReturnType};

use crate::args::{self, Args, Errors};
use crate::expectations::{self, Expectation};
use crate::func;
use crate::kind::MacroKind;

/// Expands `#[kind(attr)] item`, where the attribute is on line `line`.
pub(crate) fn expand(
    kind: MacroKind,
    attr: TokenStream,
    item: TokenStream,
    line: u32,
) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(kind, attr, &mut errors);
    if kind.is_flow() && args.target.is_none() && errors.is_empty() {
        let what = match kind {
            MacroKind::UpdateFlow => "<sink>",
            _ => "<dataset or sink>",
        };
        errors.at(
            Span::call_site(),
            format!("#[{}] needs `target = \"{what}\"`", kind.name()),
        );
    }
    let mut parsed: Item = match syn::parse2(item.clone()) {
        Ok(parsed) => parsed,
        Err(e) => {
            errors.push(e);
            return with_errors(&item, &errors);
        }
    };
    // The expectation attributes are removed even when there are errors:
    // left on the function they would expand on their own and complain
    // that they are not stacked with a dataset/flow macro.
    let mut item = item;
    let mut expects = Vec::new();
    if let Some(attrs) = expectations::attrs_mut(&mut parsed) {
        let before = attrs.len();
        expects = expectations::take(attrs, &mut errors);
        if attrs.len() != before {
            item = parsed.to_token_stream();
        }
    }
    let func = func::check(kind, &parsed, &mut errors);
    match func {
        Some(func) if errors.is_empty() => {
            let decl = declaration(kind, &args, &expects, &func, line);
            quote! {
                #item
                ::pipelines::__private::inventory::submit! { #decl }
            }
        }
        _ => with_errors(&item, &errors),
    }
}

/// The item unchanged, so that nothing else breaks, plus the errors.
fn with_errors(item: &TokenStream, errors: &Errors) -> TokenStream {
    let errors = errors.to_compile_errors();
    quote!(#item #errors)
}

fn declaration(
    kind: MacroKind,
    args: &Args,
    expectations: &[Expectation],
    func: &ItemFn,
    line: u32,
) -> TokenStream {
    let ident = &func.sig.ident;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => LitStr::new(&ident.unraw().to_string(), ident.span()),
    };
    let comment = option(args.comment.as_ref());
    let quarantine = option(args.quarantine.as_ref());
    let query = query(func);
    let location = quote! {
        ::pipelines::__private::SourceLocation { file: ::core::file!(), line: #line }
    };
    match kind {
        MacroKind::AppendFlow | MacroKind::UpdateFlow => {
            let flow_kind = if kind == MacroKind::AppendFlow {
                quote!(Append)
            } else {
                quote!(Update)
            };
            let target = args.target.as_ref().expect("checked by expand");
            let once = args.once.as_ref().is_some_and(|b| b.value);
            let conf = args.conf.iter().map(|(k, v)| quote!((#k, #v)));
            let import_checkpoint = option(args.import_checkpoint.as_ref());
            quote! {
                ::pipelines::__private::FlowDecl {
                    kind: ::pipelines::__private::FlowKind::#flow_kind,
                    name: #name,
                    target: #target,
                    once: #once,
                    comment: #comment,
                    conf: &[#(#conf),*],
                    import_checkpoint: #import_checkpoint,
                    expectations: &[#(#expectations),*],
                    quarantine: #quarantine,
                    query: #query,
                    location: #location,
                }
            }
        }
        MacroKind::Table | MacroKind::MaterializedView | MacroKind::TemporaryView => {
            let dataset_kind = match kind {
                MacroKind::Table => quote!(StreamingTable),
                MacroKind::MaterializedView => quote!(MaterializedView),
                _ => quote!(TemporaryView),
            };
            let format = option(args.format.as_ref());
            let path = option(args.path.as_ref());
            let partition_cols = &args.partition_cols;
            let schema = option(args.schema.as_ref());
            quote! {
                ::pipelines::__private::DatasetDecl {
                    kind: ::pipelines::__private::DatasetKind::#dataset_kind,
                    name: #name,
                    comment: #comment,
                    format: #format,
                    path: #path,
                    partition_cols: &[#(#partition_cols),*],
                    schema: #schema,
                    expectations: &[#(#expectations),*],
                    quarantine: #quarantine,
                    query: #query,
                    location: #location,
                }
            }
        }
    }
}

fn option(value: Option<&LitStr>) -> TokenStream {
    value.map_or_else(
        || quote!(::core::option::Option::None),
        |v| quote!(::core::option::Option::Some(#v)),
    )
}

/// The query function pointer.
///
/// Rather than casting the user's function (`f as QueryFn`), whose type
/// errors print both function pointer types in full, this defines a shim
/// with exactly the `QueryFn` signature that calls the user's function.
/// The call is spanned at the user's return type and its argument at the
/// user's parameter type, so a wrong type is reported there with a short
/// "expected `Result<DataFrame, Error>`, found `...`" message.
fn query(func: &ItemFn) -> TokenStream {
    let ident = &func.sig.ident;
    let shim = format_ident!("__pipelines_query_{}", ident.unraw());
    // Hygienic local, so a user function named `session` is not shadowed.
    let session = Ident::new("session", Span::mixed_site());

    let (ret_first, ret_last) = match &func.sig.output {
        ReturnType::Type(_, ty) => first_last_spans(ty),
        ReturnType::Default => (Span::call_site(), Span::call_site()),
    };
    let param_span = match func.sig.inputs.first() {
        Some(FnArg::Typed(param)) => first_last_spans(&param.ty).0,
        _ => Span::call_site(),
    };
    // Spans located at the user's tokens but resolved in the expansion, so
    // rustc reports the error there without suggesting edits to the
    // generated code (like wrapping the return type in `Ok(..)`).
    let mut callee = ident.clone();
    callee.set_span(Span::call_site().located_at(ret_first));
    let mut arg = session.clone();
    arg.set_span(Span::mixed_site().located_at(param_span));
    let mut call_args = Group::new(Delimiter::Parenthesis, arg.into_token_stream());
    call_args.set_span(Span::call_site().located_at(ret_last));

    quote! {
        {
            #[allow(non_snake_case)]
            fn #shim(
                #session: &::pipelines::__private::Session,
            ) -> ::pipelines::__private::Result<::pipelines::__private::DataFrame> {
                #callee #call_args
            }
            #shim as ::pipelines::__private::QueryFn
        }
    }
}

/// Spans of the first and last tokens of `tokens`: a call spanned from one
/// to the other covers the whole type, even on stable where spans cannot be
/// joined.
fn first_last_spans(tokens: &dyn ToTokens) -> (Span, Span) {
    let stream = tokens.to_token_stream();
    let mut iter = stream.into_iter().map(|tt: TokenTree| tt.span());
    let first = iter.next().unwrap_or_else(Span::call_site);
    let last = iter.last().unwrap_or(first);
    (first, last)
}
