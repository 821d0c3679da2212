//! `conductor:plugin/kube`: dynamic objects (get, list, create, update, patch, delete), watches
//! and TokenRequests, as JSON text across the boundary.

use conductor_plugin_sdk::kube::{KubeReply, KubeRequest};

use crate::plugins::wasm::bindings::conductor::plugin::{kube, types};
use crate::plugins::wasm::bindings::convert;
use crate::plugins::wasm::state::{State, wit_error};

impl State {
    async fn kube(&mut self, request: KubeRequest) -> Result<KubeReply, types::Error> {
        self.caps().kube().call(request).await.map_err(wit_error)
    }
}

fn unexpected_kube(reply: KubeReply) -> types::Error {
    types::Error::Internal(format!("unexpected kube reply {reply:?}"))
}

impl kube::Host for State {
    async fn watch(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        selector: kube::Selector,
    ) -> Result<(), types::Error> {
        let request = KubeRequest::Watch {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            selector: convert::from_wit_selector(selector),
        };
        self.kube(request).await.map(drop)
    }

    async fn watch_with(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        selector: kube::Selector,
        options: kube::WatchOptions,
    ) -> Result<(), types::Error> {
        self.caps()
            .kube()
            .watch(
                convert::from_wit_api_resource(resource),
                namespace,
                convert::from_wit_selector(selector),
                convert::from_wit_watch_options(options),
            )
            .await
            .map_err(wit_error)
    }

    async fn get(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, types::Error> {
        let request = KubeRequest::Get {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
        };
        match self.kube(request).await? {
            KubeReply::MaybeObject(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }

    async fn list(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        selector: kube::Selector,
    ) -> Result<Vec<String>, types::Error> {
        let request = KubeRequest::List {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            selector: convert::from_wit_selector(selector),
        };
        match self.kube(request).await? {
            KubeReply::Objects(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }

    async fn create(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        object: String,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Create {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            object,
        };
        self.kube_object(request).await
    }

    async fn update(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        object: String,
        subresource: Option<String>,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Update {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            object,
            subresource,
        };
        self.kube_object(request).await
    }

    async fn patch(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
        patch: String,
        subresource: Option<String>,
    ) -> Result<String, types::Error> {
        let request = KubeRequest::Patch {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
            patch,
            subresource,
        };
        self.kube_object(request).await
    }

    async fn delete(
        &mut self,
        resource: kube::ApiResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<(), types::Error> {
        let request = KubeRequest::Delete {
            resource: convert::from_wit_api_resource(resource),
            namespace,
            name,
        };
        self.kube(request).await.map(drop)
    }

    async fn create_token(&mut self, namespace: String, name: String, request: String) -> Result<String, types::Error> {
        self.kube_object(KubeRequest::CreateToken {
            namespace,
            name,
            request,
        })
        .await
    }
}

impl State {
    async fn kube_object(&mut self, request: KubeRequest) -> Result<String, types::Error> {
        match self.kube(request).await? {
            KubeReply::Object(o) => Ok(o),
            other => Err(unexpected_kube(other)),
        }
    }
}
