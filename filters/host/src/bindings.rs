//! Host-side bindings for the three worlds of `wit/filters.wit`. The
//! instance-filter bindings own the shared `types` and `host` interfaces;
//! the other two worlds reuse them so one set of records serves all roles.

/// `instance-filter` world.
pub mod filter {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "instance-filter",
    });
}

/// `ami-selector` world.
pub mod selector {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "ami-selector",
        with: {
            "nodewright:filters/types": crate::bindings::filter::nodewright::filters::types,
            "nodewright:filters/host": crate::bindings::filter::nodewright::filters::host,
        },
    });
}

/// `priority-scorer` world.
pub mod scorer {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "priority-scorer",
        with: {
            "nodewright:filters/types": crate::bindings::filter::nodewright::filters::types,
            "nodewright:filters/host": crate::bindings::filter::nodewright::filters::host,
        },
    });
}

pub use filter::nodewright::filters::host as host_iface;
pub use filter::nodewright::filters::types as wit;
