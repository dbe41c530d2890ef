//! The group accumulator of one aggregate expression, shared by the
//! streaming aggregation's state merge and the time-keyed partial
//! aggregation.

use std::sync::Arc;

use datafusion::logical_expr::GroupsAccumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::GroupsAccumulatorAdapter;

/// A group accumulator for `a` (DataFusion's adapter when it has none).
pub(crate) fn accumulator(
    a: &Arc<AggregateFunctionExpr>,
) -> datafusion::error::Result<Box<dyn GroupsAccumulator>> {
    if a.groups_accumulator_supported() {
        a.create_groups_accumulator()
    } else {
        let a = a.clone();
        Ok(Box::new(GroupsAccumulatorAdapter::new(move || {
            a.create_accumulator()
        })))
    }
}
