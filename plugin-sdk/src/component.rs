//! (WebAssembly components) The export adapter `export_plugin!` uses: each component instance
//! holds one plugin instance, and every export calls it with the component's [`Host`].

use std::cell::RefCell;

use crate::Error;
use crate::bindings::conductor::plugin as wit;
use crate::bindings::convert::*;
use crate::bindings::exports::conductor::plugin::plugin as exported;
use crate::host::Host;
use crate::plugin::{Plugin, Request, parse_config};

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn std::any::Any>>> = const { RefCell::new(None) };
}

fn with_instance<P: Plugin, R>(f: impl FnOnce(&mut P, &Host) -> Result<R, Error>) -> Result<R, wit::types::Error> {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let plugin = slot
            .as_mut()
            .and_then(|b| b.downcast_mut::<P>())
            .ok_or_else(|| wit::types::Error::Internal("the plugin was not initialised".to_owned()))?;
        f(plugin, &Host::component()).map_err(to_wit_error)
    })
}

/// The export adapter for `P`, called by the code `export_plugin!` generates.
pub struct Adapter;

impl Adapter {
    pub fn describe<P: Plugin>() -> exported::Description {
        to_wit_description(P::describe())
    }

    pub fn check_config<P: Plugin>(config: String) -> Result<(), wit::types::Error> {
        parse_config::<P::Config>(&config)
            .and_then(|c| P::check(&c))
            .map_err(to_wit_error)
    }

    pub fn init<P: Plugin>(config: String) -> Result<(), wit::types::Error> {
        let config = parse_config::<P::Config>(&config).map_err(to_wit_error)?;
        let plugin = P::init(&Host::component(), config).map_err(to_wit_error)?;
        INSTANCE.with(|cell| *cell.borrow_mut() = Some(Box::new(plugin)));
        Ok(())
    }

    pub fn start<P: Plugin>() -> Result<(), wit::types::Error> {
        with_instance::<P, _>(|p, host| p.start(host))
    }

    pub fn list<P: Plugin>(options: exported::ListOptions) -> Result<Vec<wit::types::CloudEvent>, wit::types::Error> {
        let options = from_wit_list_options(options);
        with_instance::<P, _>(|p, host| p.list(host, options))
            .map(|events| events.into_iter().map(into_wit_event).collect())
    }

    pub fn handle<P: Plugin>(
        identity: wit::types::Identity,
        event: wit::types::CloudEvent,
    ) -> Result<(), wit::types::Error> {
        let identity = from_wit_identity(identity);
        with_instance::<P, _>(|p, host| p.handle(host, identity, from_wit_event(event)))
    }

    pub fn handle_batch<P: Plugin>(requests: Vec<exported::Request>) -> Vec<Result<(), wit::types::Error>> {
        let requests: Vec<Request> = requests
            .into_iter()
            .map(|r| Request {
                identity: from_wit_identity(r.identity),
                event: from_wit_event(r.event),
            })
            .collect();
        let count = requests.len();
        match with_instance::<P, _>(|p, host| Ok(p.handle_batch(host, requests))) {
            Ok(results) => results.into_iter().map(|r| r.map_err(to_wit_error)).collect(),
            Err(e) => vec![Err(e); count],
        }
    }

    pub fn on_events<P: Plugin>(events: Vec<exported::HostEvent>) -> Result<(), wit::types::Error> {
        let events = events.into_iter().map(from_wit_host_event).collect();
        with_instance::<P, _>(|p, host| p.on_events(host, events))
    }
}
