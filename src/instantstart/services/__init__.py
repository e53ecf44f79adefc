"""Services: every rule and validation of the control plane, one package per domain.

`load_all` imports each module that declares operations, by name, so the catalog holds them; the app
calls it once at start. Plugins (test-only operation kinds, extensions) are the one dynamic import.
"""

import importlib


def load_all(plugins: tuple[str, ...] | list[str] = ()) -> None:
    """Import every service module that registers operations, then each plugin module."""
    _import_operation_modules()
    from instantstart.services.base.watch import custom

    # Watch-fed state: the custom resource kinds (training jobs, endpoints) are registered here, at start-up, not as
    # an effect of importing a module (so import order cannot change what is watched); the timeline's events
    # listener is the application's (timeline.attach).
    custom.register()

    for name in plugins:
        importlib.import_module(name)


def _import_operation_modules() -> None:
    """Import the product's service modules; each registers its operations on import."""
    # Explicit imports: the registration order is the catalog order every face shows.
    from instantstart.services.access import audit, tokens, users  # noqa: F401
    from instantstart.services.alerts import ops as alert_ops  # noqa: F401
    from instantstart.services.base import registry  # noqa: F401
    from instantstart.services.capacity import (  # noqa: F401
        instance_groups,
        karpenter,
        node_groups,
        nodes,
        validate,
    )
    from instantstart.services.capacity.software import lifecycle_update, rolling  # noqa: F401
    from instantstart.services.capacity.software import plan as software_plan  # noqa: F401
    from instantstart.services.cluster import (  # noqa: F401
        create,
        deletion,
        eks_stage,
        fleet,
        hyperpod_stage,
        import_existing,
        preflight,
        status,
        upgrade,
        upgrade_plan,
        workloads,
    )
    from instantstart.services.dependencies import stage  # noqa: F401
    from instantstart.services.diagnostics import logs  # noqa: F401
    from instantstart.services.diagnostics import nodes as node_diagnostics  # noqa: F401
    from instantstart.services.features import advanced, fsx_csi  # noqa: F401
    from instantstart.services.inference import (  # noqa: F401
        autoscaling,
        call,
        deploy,
        jumpstart,
        managed,
        pool,
        router,
        scale,
        services,
        undeploy,
    )
    from instantstart.services.monitoring import gpu as monitoring_gpu  # noqa: F401
    from instantstart.services.monitoring import nodes as monitoring_nodes  # noqa: F401
    from instantstart.services.monitoring import timeline_read  # noqa: F401
    from instantstart.services.monitoring import usage as monitoring_usage  # noqa: F401
    from instantstart.services.storage import (  # noqa: F401
        fsx,
        fsx_delete,
        fsx_inventory,
        inventory,
        models,
        s3_tools,
        workspace,
    )
    from instantstart.services.teams import ops as team_ops  # noqa: F401
    from instantstart.services.tracking import operations, wait  # noqa: F401
    from instantstart.services.training import history, job_delete, jobs, mlflow, ray_jobs, recipes, submit  # noqa: F401
