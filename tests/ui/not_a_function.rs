use pipelines::table;

#[table(name = "events")]
struct Events {
    id: String,
}

fn main() {}
