//! Compiling a resolved plan into stages: the DataFusion context, the
//! builder that cuts the plan at stateful operators into placeholder-fed
//! stages, and the logical-plan rewrites it needs (unions, conforming
//! schemas, inputs substituted).

use super::*;

/// A DataFusion context like the plan layer's SQL context (plain Utf8
/// strings, identifiers as written, our window functions), in UTC, with
/// `partitions` target partitions. Dynamic filters are off: they are
/// execution state that a re-executed plan must not carry over.
pub(super) fn new_context(partitions: usize) -> SessionContext {
    let mut config = SessionConfig::new().with_target_partitions(partitions);
    let opts = config.options_mut();
    opts.execution.time_zone = Some(crate::plan::ddl::SESSION_TIME_ZONE.to_string());
    opts.optimizer.enable_dynamic_filter_pushdown = false;
    opts.optimizer.enable_join_dynamic_filter_pushdown = false;
    opts.optimizer.enable_topk_dynamic_filter_pushdown = false;
    opts.optimizer.enable_aggregate_dynamic_filter_pushdown = false;
    crate::plan::sql::streaming_context(config)
}

pub(super) fn plan_failure(flow: &str, e: DataFusionError) -> Error {
    PlanError::new(format!(
        "flow `{flow}`: the query could not be compiled: {}",
        e.strip_backtrace()
    ))
    .into()
}

pub(super) fn leaf_name(node: &PlanNode) -> String {
    match node {
        PlanNode::Source(s) => s.describe(),
        PlanNode::DatasetRead { name, .. } => format!("dataset `{name}`"),
        other => other.name().to_string(),
    }
}

/// Plans a stage: optimizes its logical plan and plans it physically once.
pub(super) fn plan_stage(
    flow: &str,
    ctx: &SessionContext,
    clock: &super::clock::Clock,
    logical: LogicalPlan,
    inputs: Vec<StageInput>,
) -> Result<Stage> {
    let logical = clock.rewrite(logical).map_err(|e| plan_failure(flow, e))?;
    let state = ctx.state();
    let logical = state
        .optimize(&logical)
        .map_err(|e| plan_failure(flow, e))?;
    // Physical planning of these plans never waits (the leaves are
    // placeholders).
    let physical = poll_once(state.create_physical_plan(&logical))
        .ok_or_else(|| {
            Error::from(PlanError::new(format!(
                "flow `{flow}`: planning the query did not finish"
            )))
        })?
        .map_err(|e| plan_failure(flow, e))?;
    Ok(Stage {
        logical,
        physical,
        inputs,
    })
}

/// The inputs of the stage being built, with leaves used twice read once.
#[derive(Default)]
pub(super) struct StageBuilder {
    pub(super) inputs: Vec<StageInput>,
    pub(super) leaf_slots: HashMap<usize, usize>,
}

/// Builds the stage tree from the resolved tree: each node's resolved plan
/// with its input scans replaced by its inputs' plans; stateful operators
/// on streams end a stage and start a new one above them.
pub(super) struct Builder<'a> {
    pub(super) flow: &'a str,
    pub(super) partitions: usize,
    pub(super) state_partitions: usize,
    pub(super) ctx: &'a SessionContext,
    pub(super) clock: &'a super::clock::Clock,
    pub(super) leaves: Vec<Leaf>,
    pub(super) by_node: HashMap<*const PlanNode, usize>,
    pub(super) watermarks: Vec<(String, i64)>,
    pub(super) stage: StageBuilder,
    pub(super) next_op: usize,
}

impl Builder<'_> {
    pub(super) fn build(&mut self, r: &ResolvedNode) -> Result<LogicalPlan> {
        let fail = |e: DataFusionError| plan_failure(self.flow, e);
        match r.node.as_ref() {
            PlanNode::Source(spec) => return self.leaf(r, spec.streaming),
            PlanNode::DatasetRead { streaming, .. } => return self.leaf(r, *streaming),
            PlanNode::WithWatermark {
                input,
                column,
                delay,
                ..
            } if input.is_streaming() => {
                let delay_ms = delay.as_millis() as i64;
                self.watermarks.push((column.clone(), delay_ms));
                let col_index = r.schema.index_of(column).map_err(|_| {
                    PlanError::new(format!(
                        "flow `{}`: unknown watermark column `{column}`",
                        self.flow
                    ))
                })?;
                let child = self.sub_stage(&r.children[0])?;
                return self.op_slot(
                    Op::Watermark {
                        column: col_index,
                        delay_ms,
                    },
                    vec![child],
                    r.schema.clone(),
                );
            }
            PlanNode::Aggregate { input, .. } if input.is_streaming() => {
                let agg = find_aggregate(&r.plan).ok_or_else(|| {
                    PlanError::new(format!(
                        "flow `{}`: the aggregation has no aggregate step",
                        self.flow
                    ))
                })?;
                let child_schema = r.children[0].schema.clone();
                let op = AggregateOp::new(
                    self.flow,
                    agg,
                    &child_schema,
                    self.partitions,
                    self.state_partitions,
                    self.ctx,
                )?;
                let out_schema = op.output_schema();
                let child = self.sub_stage(&r.children[0])?;
                let scan = self.op_slot(Op::Aggregate(Box::new(op)), vec![child], out_schema)?;
                // Expressions over the aggregates are computed above the operator.
                return match &r.plan {
                    LogicalPlan::Projection(p) => {
                        let list: Vec<Expr> = p.expr.iter().map(|e| unqualify(e.clone())).collect();
                        LogicalPlanBuilder::from(scan)
                            .project(list)
                            .and_then(|b| b.build())
                            .map_err(fail)
                    }
                    _ => Ok(scan),
                };
            }
            PlanNode::DropDuplicates {
                input,
                columns,
                within_watermark,
            } if input.is_streaming() => {
                let child_schema = r.children[0].schema.clone();
                let op = DedupOp::new(
                    self.flow,
                    &child_schema,
                    columns.as_deref(),
                    *within_watermark,
                )?;
                let child = self.sub_stage(&r.children[0])?;
                return self.op_slot(Op::Dedup(Box::new(op)), vec![child], r.schema.clone());
            }
            PlanNode::Join {
                left,
                right,
                join_type,
                using,
                on,
            } if left.is_streaming() && right.is_streaming() => {
                let condition = if on.is_some() { r.exprs.first() } else { None };
                let op = JoinOp::new(
                    self.flow,
                    *join_type,
                    &r.children[0].schema,
                    &r.children[1].schema,
                    condition,
                    using,
                    &r.schema,
                    self.ctx,
                )?;
                let l = self.sub_stage(&r.children[0])?;
                let rr = self.sub_stage(&r.children[1])?;
                return self.op_slot(Op::Join(Box::new(op)), vec![l, rr], r.schema.clone());
            }
            _ => {}
        }
        let mut children = Vec::with_capacity(r.children.len());
        for c in &r.children {
            children.push(self.build(c)?);
        }
        match r.node.as_ref() {
            PlanNode::Union { .. } => union(children, &r.schema).map_err(fail),
            PlanNode::WithWatermark { .. } => Ok(children.remove(0)),
            PlanNode::DropDuplicates { columns, .. } => {
                let input = children.remove(0);
                let all: Vec<Expr> = input
                    .schema()
                    .iter()
                    .map(|(q, f)| Expr::from((q, f)))
                    .collect();
                let b = LogicalPlanBuilder::from(input.clone());
                match columns {
                    None => b.distinct(),
                    Some(cols) => {
                        let on = cols
                            .iter()
                            .map(|c| {
                                let (q, f) = input
                                    .schema()
                                    .iter()
                                    .find(|(_, f)| f.name() == c)
                                    .ok_or_else(|| {
                                        DataFusionError::Plan(format!("unknown column `{c}`"))
                                    })?;
                                Ok(Expr::from((q, f)))
                            })
                            .collect::<datafusion::error::Result<Vec<_>>>()?;
                        b.distinct_on(on, all, None)
                    }
                }
                .and_then(|b| b.build())
                .map_err(fail)
            }
            _ => substitute_inputs(&r.plan, &children).map_err(fail),
        }
    }

    /// Builds `r` as a stage of its own (the input of a stateful operator).
    fn sub_stage(&mut self, r: &ResolvedNode) -> Result<Stage> {
        let outer = std::mem::take(&mut self.stage);
        let built = self.build(r);
        let inner = std::mem::replace(&mut self.stage, outer);
        let built = conform(built?, &r.schema).map_err(|e| plan_failure(self.flow, e))?;
        plan_stage(self.flow, self.ctx, self.clock, built, inner.inputs)
    }

    /// A scan of a stateful operator's output in the current stage.
    fn op_slot(&mut self, op: Op, children: Vec<Stage>, schema: SchemaRef) -> Result<LogicalPlan> {
        let id = self.next_op;
        self.next_op += 1;
        let slot = self.stage.inputs.len();
        self.stage.inputs.push(StageInput::Op(Box::new(OpNode {
            id,
            op,
            width: schema.fields().len(),
            children,
        })));
        self.slot_scan(slot, schema, &format!("op{id}"))
    }

    fn slot_scan(&self, index: usize, schema: SchemaRef, name: &str) -> Result<LogicalPlan> {
        let table = SlotTable {
            index,
            schema,
            partitions: self.partitions,
        };
        LogicalPlanBuilder::scan(
            TableReference::bare(name.to_string()),
            provider_as_source(Arc::new(table)),
            None,
        )
        .and_then(|b| b.build())
        .map_err(|e| plan_failure(self.flow, e))
    }

    fn leaf(&mut self, r: &ResolvedNode, streaming: bool) -> Result<LogicalPlan> {
        let key = Arc::as_ptr(&r.node);
        let index = match self.by_node.get(&key) {
            Some(i) => *i,
            None => {
                let i = self.leaves.len();
                self.leaves.push(Leaf {
                    index: i,
                    node: r.node.clone(),
                    streaming,
                    schema: r.schema.clone(),
                });
                self.by_node.insert(key, i);
                i
            }
        };
        let slot = match self.stage.leaf_slots.get(&index) {
            Some(s) => *s,
            None => {
                let s = self.stage.inputs.len();
                self.stage.inputs.push(StageInput::Leaf(index));
                self.stage.leaf_slots.insert(index, s);
                s
            }
        };
        self.slot_scan(slot, r.schema.clone(), &format!("leaf{index}"))
    }
}

/// Drops the qualifiers of column references (they referred to the
/// aggregation's input scan; the operator's output scan has its own).
pub(super) fn unqualify(e: Expr) -> Expr {
    e.transform_up(|sub| match sub {
        Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
            c.name,
        )))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
    .unwrap_or_else(|e| {
        Expr::Literal(
            datafusion::scalar::ScalarValue::Utf8(Some(e.to_string())),
            None,
        )
    })
}

/// Replaces the input scans of a node's resolved plan (`input`, `left`,
/// `right`, `input0`...) by its inputs' plans, under the same names.
pub(super) fn substitute_inputs(
    plan: &LogicalPlan,
    children: &[LogicalPlan],
) -> datafusion::error::Result<LogicalPlan> {
    plan.clone()
        .transform_up(|p| {
            let LogicalPlan::TableScan(scan) = &p else {
                return Ok(Transformed::no(p));
            };
            let name = scan.table_name.table().to_string();
            let idx = match name.as_str() {
                "input" | "left" => Some(0),
                "right" => Some(1),
                n => n
                    .strip_prefix("input")
                    .and_then(|i| i.parse::<usize>().ok()),
            };
            let Some(child) = idx.and_then(|i| children.get(i)) else {
                return Err(DataFusionError::Internal(format!(
                    "unexpected scan `{name}` in a resolved plan"
                )));
            };
            let alias = SubqueryAlias::try_new(Arc::new(child.clone()), name)?;
            Ok(Transformed::yes(LogicalPlan::SubqueryAlias(alias)))
        })
        .map(|t| t.data)
}

/// A union by position: every input cast to the resolved column types and
/// named like the first.
pub(super) fn union(
    children: Vec<LogicalPlan>,
    schema: &SchemaRef,
) -> datafusion::error::Result<LogicalPlan> {
    let mut builder: Option<LogicalPlanBuilder> = None;
    for child in children {
        let list: Vec<Expr> = child
            .schema()
            .iter()
            .zip(schema.fields())
            .map(|((q, f), target)| {
                let c = Expr::from((q, f));
                let c = if f.data_type() == target.data_type() {
                    c
                } else {
                    cast(c, target.data_type().clone())
                };
                c.alias(target.name())
            })
            .collect();
        let p = LogicalPlanBuilder::from(child).project(list)?.build()?;
        builder = Some(match builder {
            None => LogicalPlanBuilder::from(p),
            Some(b) => b.union(p)?,
        });
    }
    builder
        .ok_or_else(|| DataFusionError::Plan("union without inputs".into()))?
        .build()
}

/// Adds a final projection when the plan's column names or types differ
/// from the resolved schema.
pub(super) fn conform(
    plan: LogicalPlan,
    schema: &SchemaRef,
) -> datafusion::error::Result<LogicalPlan> {
    let fields = plan.schema().fields();
    let same = fields.len() == schema.fields().len()
        && fields
            .iter()
            .zip(schema.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if same {
        return Ok(plan);
    }
    if fields.len() != schema.fields().len() {
        return Err(DataFusionError::Internal(format!(
            "the plan has {} columns, its resolved schema {}",
            fields.len(),
            schema.fields().len()
        )));
    }
    let list: Vec<Expr> = plan
        .schema()
        .iter()
        .zip(schema.fields())
        .map(|((q, f), target)| {
            let c = Expr::Column(Column::new(q.cloned(), f.name()));
            let c = if f.data_type() == target.data_type() {
                c
            } else {
                cast(c, target.data_type().clone())
            };
            c.alias(target.name())
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(list)?.build()
}
