// Every mistake of one create_auto_cdc_flow! call is reported at once.
pipelines::create_auto_cdc_flow!(
    target = "customers",
    source = "customers_cdc",
    keys = "id",
    sequence = "seq",
    stored_as_scd_type = 3,
    target = "again",
);

// Required keys.
pipelines::create_auto_cdc_flow!(target = "customers", source = "customers_cdc");

fn main() {}
