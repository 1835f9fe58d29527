//! The full sync of one Service: ensure its load balancer (finalizer first, status last) or
//! clean it up (load balancer first, finalizer last).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::controller::ServiceReconciler;
use super::decisions::{
    EVENT_DELETED, EVENT_DELETING, ServiceDecision, ServiceStep, add_finalizer_patch,
    remove_finalizer_patch, status_change, status_patch, wants_load_balancer,
};
use super::errors::ServiceSyncError;
use crate::change::Verb;
use crate::events::{EventType, error_chain};
use crate::provider::Outcome;
use crate::runtime::reconcile::is_not_found;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Ensure,
    Delete,
}

impl ServiceReconciler {
    /// The Service is gone from the cache: delete the load balancer of the remembered version
    /// (the legacy path for Services without the finalizer).
    pub(super) async fn process_deletion(&self, key: &str) -> Result<(), ServiceSyncError> {
        let Some(previous) = self.remembered.lock().get(key).cloned() else {
            return Ok(());
        };
        tracing::info!("service has been deleted; cleaning up its load balancer");
        self.process_load_balancer_delete(&previous).await?;
        self.forget(key);
        Ok(())
    }

    async fn process_load_balancer_delete(
        &self,
        service: &Service,
    ) -> Result<(), ServiceSyncError> {
        if !wants_load_balancer(service, self.class()) {
            return Ok(());
        }
        self.event(service, EVENT_DELETING).await;
        if let Err(err) = self
            .lb
            .ensure_load_balancer_deleted(self.cluster(), service)
            .await
        {
            let message = format!("Error deleting load balancer: {}", error_chain(&err));
            self.recorder
                .publish(
                    service,
                    EventType::Warning,
                    "DeleteLoadBalancerFailed",
                    &message,
                )
                .await;
            return Err(ServiceSyncError::DeleteLoadBalancer(err));
        }
        self.event(service, EVENT_DELETED).await;
        Ok(())
    }

    pub(super) async fn process_create_or_update(
        &self,
        service: Arc<Service>,
        key: &str,
    ) -> Result<(), ServiceSyncError> {
        let previous = self.remembered.lock().get(key).cloned();
        if let Some(previous) = previous
            && previous.metadata.uid != service.metadata.uid
        {
            // Deleted and re-created without the finalizer: clean up the old one first.
            self.process_load_balancer_delete(&previous).await?;
            self.last_synced_nodes.lock().remove(key);
        }
        if ServiceDecision::of(&service, self.class()).is_none() {
            return self.let_go(&service, key).await;
        }
        self.remembered
            .lock()
            .insert(key.to_owned(), service.clone());
        match self.sync_load_balancer(&service, key).await? {
            Operation::Delete => self.forget(key),
            Operation::Ensure => {}
        }
        Ok(())
    }

    /// `service` is of a class another implementation owns now. It is never touched (no
    /// finalizer, status or event: they are the other implementation's). Only if it was ours
    /// until now (the watch saw it change class in one step, missing the type change the
    /// apiserver requires between) is its load balancer deleted, as Kubernetes' own controller
    /// deletes the load balancer of a Service that stops wanting one.
    async fn let_go(&self, service: &Service, key: &str) -> Result<(), ServiceSyncError> {
        let previous = self.remembered.lock().get(key).cloned();
        if previous.is_some_and(|p| wants_load_balancer(&p, self.class())) {
            tracing::info!(
                class = super::class::class_of(service),
                "the Service changed to another load balancer class; deleting its load balancer, leaving the Service to that class"
            );
            match self
                .lb
                .ensure_load_balancer_deleted(self.cluster(), service)
                .await
            {
                Ok(_) => {}
                Err(err) => return Err(ServiceSyncError::DeleteLoadBalancer(err)),
            }
        }
        self.forget(key);
        Ok(())
    }

    fn services_api(&self, service: &Service) -> Api<Service> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn patch_status(
        &self,
        service: &Service,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        self.services_api(service)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
    }

    /// Execute the decision's steps in order ([`ServiceDecision::steps`]); `plan` prints the
    /// same steps.
    async fn sync_load_balancer(
        &self,
        service: &Service,
        key: &str,
    ) -> Result<Operation, ServiceSyncError> {
        let Some(decision) = ServiceDecision::of(service, self.class()) else {
            // Checked by the caller; a Service of another class is never touched.
            return Ok(Operation::Delete);
        };
        let operation = if decision.clean_up {
            tracing::info!("deleting load balancer, if any");
            Operation::Delete
        } else {
            tracing::info!("ensuring load balancer");
            Operation::Ensure
        };
        // Read while this Service's key is held, so no other action of it can interleave;
        // remembered only once the cloud took them.
        let nodes = if decision.clean_up {
            Vec::new()
        } else {
            self.config.nodes.select(&self.nodes.list())
        };
        let mut new_status = LoadBalancerStatus::default();
        for step in decision.steps(nodes.is_empty()) {
            match step {
                ServiceStep::Event(event) => self.event(service, event).await,
                ServiceStep::Finalizer(Verb::Add) => self
                    .patch_status(service, &add_finalizer_patch())
                    .await
                    .map_err(ServiceSyncError::AddFinalizer)?,
                ServiceStep::Finalizer(_) => self
                    .remove_finalizer(service)
                    .await
                    .map_err(ServiceSyncError::RemoveFinalizer)?,
                ServiceStep::DeleteLoadBalancer => self.delete_if_present(service).await?,
                ServiceStep::EnsureLoadBalancer => {
                    self.service_metrics.loadbalancer_syncs.inc();
                    let outcome = self
                        .lb
                        .ensure_load_balancer(self.cluster(), service, &nodes)
                        .await
                        .map_err(ServiceSyncError::EnsureLoadBalancer)?;
                    self.last_synced_nodes
                        .lock()
                        .insert(key.to_owned(), nodes.clone());
                    match outcome {
                        Outcome::Done(status) => new_status = status,
                        Outcome::ImplementedElsewhere => {
                            tracing::debug!("load balancer implemented elsewhere; nothing to do");
                            return Ok(Operation::Ensure);
                        }
                    }
                }
                // Written as the provider gives it, `ipMode` included (every supported
                // apiserver keeps it); a stored status without `ipMode` equals one that says
                // `VIP`.
                ServiceStep::WriteStatus => {
                    if status_change(service, &new_status).is_none() {
                        continue;
                    }
                    match self.patch_status(service, &status_patch(&new_status)).await {
                        Ok(()) => {}
                        // Mostly a Service that disappeared right after its finalizer was
                        // removed.
                        Err(err) if is_not_found(&err) => {}
                        Err(err) => return Err(ServiceSyncError::UpdateStatus(err)),
                    }
                }
            }
        }
        Ok(operation)
    }

    /// Delete the Service's load balancer if the provider has one.
    async fn delete_if_present(&self, service: &Service) -> Result<(), ServiceSyncError> {
        let existing = self
            .lb
            .get_load_balancer(self.cluster(), service)
            .await
            .map_err(ServiceSyncError::GetLoadBalancer)?;
        if existing.is_none() {
            return Ok(());
        }
        self.event(service, EVENT_DELETING).await;
        match self
            .lb
            .ensure_load_balancer_deleted(self.cluster(), service)
            .await
        {
            Ok(Outcome::Done(())) => Ok(()),
            Ok(Outcome::ImplementedElsewhere) => {
                tracing::debug!("load balancer implemented elsewhere; ignoring on deletion");
                Ok(())
            }
            Err(err) => Err(ServiceSyncError::DeleteLoadBalancer(err)),
        }
    }

    async fn remove_finalizer(&self, service: &Service) -> Result<(), kube::Error> {
        match self.patch_status(service, &remove_finalizer_patch()).await {
            Err(err) if is_not_found(&err) => Ok(()),
            other => other,
        }
    }
}
