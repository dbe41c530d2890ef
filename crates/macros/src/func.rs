//! Checks that the annotated item is a `fn name(s: &Session) -> Result<DataFrame>`.
//!
//! Only the shape is checked here; the types themselves are checked by the
//! compiler through the code the expansion generates.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{FnArg, GenericParam, Item, ItemFn, ReturnType, Type};

use crate::args::Errors;
use crate::kind::MacroKind;

const SIGNATURE: &str = "`fn name(s: &Session) -> Result<DataFrame>`";

/// The function, if `item` is one with an acceptable shape.
pub(crate) fn check(kind: MacroKind, item: &Item, errors: &mut Errors) -> Option<ItemFn> {
    let Item::Fn(func) = item else {
        errors.spanned(
            item_head(item),
            format!(
                "#[{}] must be applied to a function {SIGNATURE}",
                kind.name()
            ),
        );
        return None;
    };
    let before = errors.len();
    let sig = &func.sig;
    if let Some(asyncness) = &sig.asyncness {
        errors.spanned(
            asyncness,
            "flow functions must not be async: return a lazy DataFrame, the engine runs it",
        );
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.spanned(unsafety, "flow functions must not be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(abi, "flow functions must not declare an ABI (`extern`)");
    }
    let generic = sig
        .generics
        .params
        .iter()
        .any(|p| !matches!(p, GenericParam::Lifetime(_)));
    if generic || sig.generics.where_clause.is_some() {
        let mut tokens = sig.generics.to_token_stream();
        sig.generics.where_clause.to_tokens(&mut tokens);
        errors.spanned(
            tokens,
            format!("flow functions must not be generic: the engine calls them as {SIGNATURE}"),
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.spanned(variadic, "flow functions take one parameter `&Session`");
    }

    let mut params = sig.inputs.iter();
    match params.next() {
        None => errors.at(
            sig.paren_token.span.join(),
            "flow functions take one parameter `&Session`",
        ),
        Some(FnArg::Receiver(receiver)) => errors.spanned(
            receiver,
            "flow functions take one parameter `&Session`; methods (`self`) are not supported, \
             declare a free function",
        ),
        Some(FnArg::Typed(param)) => {
            if !is_session_ref(&param.ty) {
                errors.spanned(param, "flow functions take one parameter `&Session`");
            }
        }
    }
    let extra: TokenStream = params.map(ToTokens::into_token_stream).collect();
    if !extra.is_empty() {
        errors.spanned(
            extra,
            "flow functions take one parameter `&Session`; remove the other parameters",
        );
    }

    if let ReturnType::Default = sig.output {
        errors.spanned(sig, "flow functions return `Result<DataFrame>`");
    }

    (errors.len() == before).then(|| func.clone())
}

/// `&Session`, `&pipelines::Session`, `&'a crate::Session`: a shared
/// reference to any path ending in `Session`.
fn is_session_ref(ty: &Type) -> bool {
    let Type::Reference(r) = ty else {
        return false;
    };
    if r.mutability.is_some() {
        return false;
    }
    let mut elem = &*r.elem;
    loop {
        match elem {
            Type::Group(g) => elem = &g.elem,
            Type::Paren(p) => elem = &p.elem,
            _ => break,
        }
    }
    let Type::Path(p) = elem else {
        return false;
    };
    p.qself.is_none()
        && p.path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Session" && s.arguments.is_empty())
}

/// The leading keyword and name of an item (`struct Foo`), to point errors
/// at a short span rather than the whole item.
fn item_head(item: &Item) -> TokenStream {
    match item {
        Item::Struct(i) => head(&i.struct_token, &i.ident),
        Item::Enum(i) => head(&i.enum_token, &i.ident),
        Item::Union(i) => head(&i.union_token, &i.ident),
        Item::Trait(i) => head(&i.trait_token, &i.ident),
        Item::Type(i) => head(&i.type_token, &i.ident),
        Item::Const(i) => head(&i.const_token, &i.ident),
        Item::Static(i) => head(&i.static_token, &i.ident),
        Item::Mod(i) => head(&i.mod_token, &i.ident),
        Item::Impl(i) => head(&i.impl_token, &i.self_ty),
        Item::Use(i) => head(&i.use_token, &i.tree),
        _ => item.to_token_stream(),
    }
}

fn head(keyword: &dyn ToTokens, name: &dyn ToTokens) -> TokenStream {
    quote!(#keyword #name)
}
