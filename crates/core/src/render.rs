//! Renders the dataflow graph as Mermaid or Graphviz DOT text.
//!
//! External sources (files, Kafka, rate, ...) appear as their own nodes, then
//! flows, then the datasets and sinks they write.

use std::collections::BTreeMap;

use crate::definition::DatasetType;
use crate::graph::PipelineGraph;

fn id(prefix: &str, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{prefix}_{clean}")
}

fn escape(text: &str) -> String {
    text.replace('"', "'")
}

/// External sources of every flow, numbered in flow order: (node id, label, flow name).
fn sources(graph: &PipelineGraph) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for f in graph.ordered_flows() {
        for src in f.plan.sources() {
            let label = src.describe();
            let next = format!("src_{}", seen.len());
            let node = seen.entry(label.clone()).or_insert(next).clone();
            out.push((node, label, f.def.name.clone()));
        }
    }
    out
}

/// A Mermaid flowchart of the pipeline.
pub fn mermaid(graph: &PipelineGraph) -> String {
    let mut s = format!("%% pipeline {}\nflowchart LR\n", graph.name);
    let srcs = sources(graph);
    let mut declared = std::collections::BTreeSet::new();
    for (node, label, _) in &srcs {
        if declared.insert(node.clone()) {
            s.push_str(&format!("  {node}>\"{}\"]\n", escape(label)));
        }
    }
    for d in graph.datasets.values() {
        let label = format!(
            "{}<br/>{} ({})",
            d.def.name,
            d.def.dataset_type().describe(),
            d.format()
        );
        let node = id("ds", &d.def.name);
        match d.def.dataset_type() {
            DatasetType::Sink => s.push_str(&format!("  {node}[/\"{}\"/]\n", escape(&label))),
            DatasetType::TemporaryView => {
                s.push_str(&format!("  {node}(\"{}\")\n", escape(&label)))
            }
            _ => s.push_str(&format!("  {node}[(\"{}\")]\n", escape(&label))),
        }
    }
    for f in graph.ordered_flows() {
        s.push_str(&format!(
            "  {}{{{{\"{}<br/>{} flow\"}}}}\n",
            id("flow", &f.def.name),
            escape(&f.def.name),
            f.output_mode
        ));
    }
    for (node, _, flow) in &srcs {
        s.push_str(&format!("  {node} --> {}\n", id("flow", flow)));
    }
    for f in graph.ordered_flows() {
        for (ds, streaming) in &f.reads {
            let arrow = if *streaming { "-->" } else { "-.->" };
            s.push_str(&format!(
                "  {} {arrow} {}\n",
                id("ds", ds),
                id("flow", &f.def.name)
            ));
        }
        s.push_str(&format!(
            "  {} --> {}\n",
            id("flow", &f.def.name),
            id("ds", &f.def.target)
        ));
    }
    s
}

/// A Graphviz DOT digraph of the pipeline.
pub fn dot(graph: &PipelineGraph) -> String {
    let mut s = format!(
        "digraph \"{}\" {{\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n",
        escape(&graph.name)
    );
    let srcs = sources(graph);
    let mut declared = std::collections::BTreeSet::new();
    for (node, label, _) in &srcs {
        if declared.insert(node.clone()) {
            s.push_str(&format!(
                "  {node} [shape=cds, label=\"{}\"];\n",
                escape(label)
            ));
        }
    }
    for d in graph.datasets.values() {
        let shape = match d.def.dataset_type() {
            DatasetType::Sink => "invhouse",
            DatasetType::TemporaryView => "box, style=rounded",
            _ => "cylinder",
        };
        s.push_str(&format!(
            "  {} [shape={shape}, label=\"{}\\n{} ({})\"];\n",
            id("ds", &d.def.name),
            escape(&d.def.name),
            d.def.dataset_type().describe(),
            d.format()
        ));
    }
    for f in graph.ordered_flows() {
        s.push_str(&format!(
            "  {} [shape=hexagon, label=\"{}\\n{} flow\"];\n",
            id("flow", &f.def.name),
            escape(&f.def.name),
            f.output_mode
        ));
    }
    for (node, _, flow) in &srcs {
        s.push_str(&format!("  {node} -> {};\n", id("flow", flow)));
    }
    for f in graph.ordered_flows() {
        for (ds, streaming) in &f.reads {
            let style = if *streaming { "" } else { " [style=dashed]" };
            s.push_str(&format!(
                "  {} -> {}{style};\n",
                id("ds", ds),
                id("flow", &f.def.name)
            ));
        }
        s.push_str(&format!(
            "  {} -> {};\n",
            id("flow", &f.def.name),
            id("ds", &f.def.target)
        ));
    }
    s.push_str("}\n");
    s
}
