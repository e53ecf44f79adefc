"""The catalog operations the UI reached only through the API before, in a real browser against `instantstart serve
--twin` (one twin cluster for the module): creation stage by stage (explicit subnet CIDRs, dependencies, HyperPod)
with each stage's status, the S3 defaults, FSx adopt refused and create, a download into an FSx claim and where it
stands, a PyTorch job and a Ray job from an image, the last log lines, deletion, MLflow, every job, pod logs and
events, the software update, EKS node groups and Karpenter. Each state passes axe-core's WCAG 2.0/2.1 A and AA
rules; the new controls are reached and used with the keyboard; every control carries data-operation."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot, wait_op

pytestmark = pytest.mark.e2e

TAG = "wparity"
REGION = "us-west-2"
CIDRS = {"vpcCidr": "10.7.0.0/16", "publicSubnet1Cidr": "10.7.0.0/24", "publicSubnet2Cidr": "10.7.1.0/24",
         "eksPrivateSubnet1Cidr": "10.7.2.0/24", "eksPrivateSubnet2Cidr": "10.7.3.0/24",
         "hyperPodPrivateSubnetCidr": "10.7.16.0/20"}
MODEL = "twin-org/tiny-llama"


def aws(served: Served, service: str) -> Any:
    """A boto3 client on the served twin, for what the control plane did there."""
    return served.aws(service, REGION)


def tab_to(page: Any, selector: str, limit: int = 400) -> None:
    """Press Tab until the focused element matches `selector`: the control is reachable by keyboard alone."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{selector} is not reachable with Tab")


def operations_on_page(page: Any) -> set[str]:
    """The data-operation values of the page as rendered."""
    names: list[str] = page.eval_on_selector_all("[data-operation]", "els => els.map((e) => e.dataset.operation)")
    return set(names)


def progress_of(page: Any, kind: str) -> Any:
    """The cluster page's progress panel once it follows an operation of `kind`."""
    panel = page.locator("#progress .progress-panel")
    expect(panel.locator("strong").first).to_have_text(kind, timeout=30_000)
    return panel


def test_create_stage_by_stage_with_explicit_cidrs(page: Any, served: Served) -> None:
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    stages = page.locator("#stages")
    expect(stages.locator("#eks-status")).to_contain_text("No active cluster")
    assert {"cluster_create_eks", "cluster_create_eks_with_cidr", "cluster_configure_dependencies", "hyperpod_create",
            "cluster_get_eks_creation_status", "cluster_get_dependency_status",
            "hyperpod_get_creation_status"} <= operations_on_page(page)

    # Keyboard only: open "Create stage by stage", then the explicit CIDRs, type them, submit.
    tab_to(page, "#stages-create > summary")
    page.keyboard.press("Enter")
    tab_to(page, "#eks-tag")
    page.keyboard.type(TAG)
    tab_to(page, "#eks-vpc-cidr")
    page.keyboard.type(CIDRS["vpcCidr"])
    tab_to(page, "#eks-cidrs > summary")
    page.keyboard.press("Enter")
    for name, value in CIDRS.items():
        if name != "vpcCidr":
            tab_to(page, f"#eks-{name}")
            page.keyboard.type(value)
    audit(page, "Clusters with the stage-by-stage forms open")
    shot(page, "60-stages-explicit-cidrs")
    tab_to(page, '[data-operation="cluster_create_eks_with_cidr"]')
    page.keyboard.press("Enter")
    panel = progress_of(page, "cluster_create_eks")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=120_000)
    ec2 = aws(served, "ec2")
    [vpc] = ec2.describe_vpcs(Filters=[{"Name": "tag:instantstart:cluster-tag", "Values": [TAG]}])["Vpcs"]
    assert vpc["CidrBlock"] == CIDRS["vpcCidr"]
    in_vpc = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])["Subnets"]
    subnets = {s["CidrBlock"] for s in in_vpc}
    assert {CIDRS["publicSubnet1Cidr"], CIDRS["eksPrivateSubnet2Cidr"]} <= subnets, subnets

    # Make it active (header), then the dependencies and the HyperPod cluster, each followed to the end.
    page.locator("#active-cluster").select_option(TAG)
    expect(page.locator(f'#clusters tr[data-cluster="{TAG}"]')).to_contain_text("active")
    expect(stages.locator("#eks-status [data-state]")).to_have_attribute("data-state", "SUCCEEDED")
    stages.locator("#stages-create > summary").click()
    stages.get_by_role("button", name="Configure dependencies").click()
    panel = progress_of(page, "cluster_configure_dependencies")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=180_000)
    stages.locator("#stages-create > summary").click()
    form = stages.locator("#hyperpod-form")
    form.get_by_label("Availability Zone", exact=True).select_option("us-west-2c")
    form.get_by_label("Instance type").select_option("ml.g6.4xlarge")
    form.get_by_role("button", name="Create HyperPod cluster").click()
    panel = progress_of(page, "hyperpod_create")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=180_000)
    expect(stages.locator("#hyperpod-status [data-state]")).to_have_attribute("data-state", "SUCCEEDED")
    expect(stages.locator("#hyperpod-status")).to_contain_text("InService")
    expect(stages.locator("#dependency-status tr[data-dependency]").first).to_be_visible()
    shot(page, "61-stages-status")
    audit(page, "Clusters with every stage's status")
    assert not page.page_errors, page.page_errors


def test_storage_defaults_fsx_and_a_download_into_fsx(page: Any, served: Served) -> None:
    page.get_by_role("link", name="Storage & Models").click()
    defaults = page.locator("#s3-defaults")
    expect(defaults).to_contain_text("default/s3-claim")
    expect(defaults).to_contain_text(f"clusters/{TAG}/data/")
    expect(page.locator("#add-s3").get_by_label("Name")).to_have_attribute("placeholder", "s3-claim")
    # Nothing typed: the defaults shown are what is made.
    page.locator("#add-s3").get_by_role("button", name="Add S3 volume").click()
    panel = page.locator("#storage-op .progress-panel")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=90_000)
    expect(page.locator('#claims tr[data-claim="s3-claim"]')).to_contain_text("Bound")

    # Adopt: a file system that does not exist is refused, the answer beside the form.
    fsx = page.locator("#add-fsx")
    fsx.get_by_label("Name").fill("adopted")
    fsx.get_by_label("Existing file system id").fill("fs-0123456789abcdef0")
    fsx.get_by_role("button", name="Add FSx volume").click()
    expect(fsx.locator(".form-error")).to_contain_text("fs-0123456789abcdef0")
    audit(page, "Storage with an FSx adoption refused")
    # Create: a new file system with the CSI driver, then its claim.
    fsx.get_by_label("Name").fill("fsx-a")
    fsx.get_by_label("Existing file system id").fill("")
    fsx.get_by_label("Deployment type").select_option("SCRATCH_2")
    fsx.get_by_label("Enable the FSx CSI driver if needed").check()
    fsx.get_by_role("button", name="Add FSx volume").click()
    expect(panel.locator("strong").first).to_have_text("fsx_storage_create")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=240_000)
    expect(page.locator('#claims tr[data-claim="fsx-a"]')).to_contain_text("Bound")
    assert aws(served, "fsx").describe_file_systems()["FileSystems"][0]["FileSystemType"] == "LUSTRE"

    # A model into the FSx claim instead of the S3 claim, then where it stands.
    download = page.locator("#download")
    download.get_by_label("Model id").fill(MODEL)
    download.get_by_label("Into an FSx claim instead").select_option("fsx-a")
    download.get_by_role("button", name="Download").click()
    expect(panel.locator("strong").first).to_have_text("model_download")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=180_000)
    with served.api() as api:
        op = api.get(f"/api/v1/operations/{panel.get_attribute('data-operation')}").json()
    assert op["kind"] == "model_download" and op["params"]["claim"] == "fsx-a", op["params"]
    status = page.locator("#model-status")
    status.get_by_label("Model id").fill(MODEL)
    download.get_by_label("Into an FSx claim instead").select_option("fsx-a")
    tab_to(page, '#model-status [data-operation="model_download_status"]')
    page.keyboard.press("Enter")
    expect(page.locator("#model-status-result")).to_contain_text("COMPLETE")
    expect(page.locator("#model-status-result")).to_contain_text("fsx-a")
    shot(page, "62-storage-fsx-download")
    audit(page, "Storage with a download status")
    assert {"s3_storage_get_defaults", "fsx_storage_create", "model_download_status",
            "model_download_enhanced"} <= operations_on_page(page)


def test_jobs_from_an_image_logs_delete_and_mlflow(page: Any, served: Served) -> None:
    page.get_by_role("link", name="Training").click()
    job = page.locator("#job-form")
    job.get_by_label("Job name").fill("plain-1")
    job.get_by_label("Image").fill("example/pytorch:1")
    job.get_by_label("Instance type").select_option("ml.g6.4xlarge")
    job.get_by_label("Command").fill("train.py --epochs 1")
    # Keyboard: the submit button is reached and pressed with Enter. Refused until the training operator runs
    # (the stage-by-stage cluster has none): the API's hint shows under the form.
    tab_to(page, '#job-form [data-operation="training_job_submit"]')
    page.keyboard.press("Enter")
    expect(job.locator(".form-error")).to_contain_text("trainingOperator")
    # A Ray job likewise until the KubeRay operator runs.
    ray = page.locator("#ray-form")
    ray.get_by_label("Job name").fill("ray-1")
    ray.get_by_label("Image").fill("example/ray:1")
    ray.get_by_label("Instance type").select_option("ml.g6.4xlarge")
    ray.get_by_label("Entrypoint").fill("python3 main.py")
    ray.get_by_role("button", name="Submit Ray job").click()
    expect(ray.locator(".form-error")).to_contain_text("kuberayOperator")
    audit(page, "Training with both jobs refused")
    with served.api() as api:
        ref = api.post("/api/v1/capacity/advanced-features", json={
            "trainingOperator": {"enabled": True}, "kuberayOperator": {"enabled": True}}).json()
    assert wait_op(served, ref["operationId"])["status"] == "SUCCEEDED"

    job.get_by_role("button", name="Submit PyTorch job").click()
    expect(page.locator("#banner")).to_contain_text("Submitted plain-1", timeout=90_000)
    expect(job.locator(".form-error")).to_have_count(0)
    expect(job.get_by_label("Job name")).to_have_value("")  # the submitted form starts afresh
    # The lists refresh every 5 s from the watched state: wait for the row, not a fixed time.
    expect(page.locator('#jobs tr[data-job="plain-1"]')).to_contain_text("HyperPodPyTorchJob", timeout=30_000)
    expect(page.locator('#all-jobs tr[data-job="plain-1"]')).to_be_visible(timeout=30_000)
    with served.api() as api:
        status = api.get("/api/v1/training/jobs/status", params={"jobName": "plain-1"}).json()
    assert status["job"]["kind"] == "HyperPodPyTorchJob" and status["image"] == "example/pytorch:1", status
    ray.get_by_role("button", name="Submit Ray job").click()
    expect(page.locator("#banner")).to_contain_text("Submitted ray-1", timeout=90_000)
    expect(page.locator('#jobs tr[data-job="ray-1"]')).to_contain_text("RayJob")

    # MLflow for the cluster.
    page.locator("#mlflow-form").get_by_role("button", name="Set up MLflow").click()
    expect(page.locator("#banner")).to_contain_text("mlflow_configure succeeded", timeout=120_000)
    shot(page, "63-training-forms")
    audit(page, "Training with the job forms")

    # The job's page: its last log lines at once, then delete it from there.
    page.locator('#jobs tr[data-job="plain-1"]').get_by_role("link", name="plain-1").click()
    expect(page.locator("#job-pods")).to_contain_text("plain-1")
    page.get_by_role("button", name="Last lines").click()
    expect(page.locator("#job-log-tail-note")).to_contain_text("line(s)")
    expect(page.locator("#job-log-tail")).to_be_focused()
    audit(page, "Training job with its last log lines")
    page.locator("#job").get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Delete job").click()
    expect(page).to_have_url(f"{served.url}/#/training", timeout=60_000)
    expect(page.locator('#jobs tr[data-job="plain-1"]')).to_have_count(0)
    with served.api() as api:
        assert api.get("/api/v1/training/jobs/status", params={"jobName": "plain-1"}).status_code == 404
    # And one from its row, with the keyboard: Delete…, then the dialog's confirm button.
    tab_to(page, '#jobs tr[data-job="ray-1"] [data-operation="training_job_delete"]')
    page.keyboard.press("Enter")
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Delete job")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator('#jobs tr[data-job="ray-1"]')).to_have_count(0, timeout=60_000)
    assert {"training_job_submit", "ray_job_submit", "mlflow_configure", "job_list_all"} <= operations_on_page(page)
    assert not page.page_errors, page.page_errors


def test_pod_logs_and_events_on_monitoring(page: Any, served: Served) -> None:
    page.get_by_role("link", name="Monitoring").click()
    row = page.locator("#workloads tr[data-pod]").first
    expect(row).to_be_visible()
    pod = row.get_attribute("data-pod")
    row.get_by_role("button", name=f"Logs of {pod}").click()
    expect(page.locator("#pod-log-note")).to_contain_text(pod)
    expect(page.locator("#pod-log")).to_be_focused()
    # A pod that does not exist: the error beside the form.
    form = page.locator("#pod-logs-form")
    form.get_by_label("Pod").fill("no-such-pod")
    form.get_by_role("button", name="Show logs").click()
    expect(form.locator(".form-error")).to_contain_text("no-such-pod")
    # Events (cluster_events): only the control plane's own operations.
    events = page.locator("#timeline")
    events.get_by_label("Source").select_option("operation")
    expect(events.locator("tbody tr").first).to_contain_text("operation")
    shot(page, "64-monitoring-diagnostics")
    audit(page, "Monitoring with pod logs and events")
    assert {"pod_logs", "cluster_events"} <= operations_on_page(page)


def test_software_update_node_groups_and_karpenter(page: Any, served: Served) -> None:
    eks = aws(served, "eks")
    cluster = eks.describe_cluster(name=f"eks-cluster-{TAG}")["cluster"]
    role = aws(served, "iam").create_role(RoleName=f"{TAG}-nodes", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks.create_nodegroup(clusterName=cluster["name"], nodegroupName="system", nodeRole=role,
                         instanceTypes=["m5.xlarge"], subnets=cluster["resourcesVpcConfig"]["subnetIds"],
                         scalingConfig={"minSize": 1, "maxSize": 2, "desiredSize": 1})
    with served.api() as api:
        ref = api.post("/api/v1/capacity/instance-groups", json={
            "instanceGroupName": "auto-a", "instanceType": "ml.g6.12xlarge", "instanceCount": 0,
            "availabilityZone": "us-west-2c"}).json()
    assert wait_op(served, ref["operationId"])["status"] == "SUCCEEDED"
    page.get_by_role("link", name="Cluster Management").click()
    capacity = page.locator("#capacity")
    panel = capacity.locator(".capacity-op .progress-panel")

    # EKS node group: resized, then deleted after its confirmation.
    group = capacity.locator('#nodegroups tr[data-nodegroup="system"]')
    expect(group).to_contain_text("m5.xlarge")
    assert {"cluster_nodegroup_scale", "cluster_nodegroup_delete"} <= operations_on_page(page)
    group.get_by_label("Maximum size of system").fill("3")
    group.get_by_label("Desired size of system").fill("2")
    group.get_by_role("button", name="Resize").click()
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=60_000)
    scaling = eks.describe_nodegroup(clusterName=cluster["name"], nodegroupName="system")["nodegroup"]["scalingConfig"]
    assert scaling == {"minSize": 1, "maxSize": 3, "desiredSize": 2}, scaling
    capacity.locator('#nodegroups tr[data-nodegroup="system"]').get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Delete node group").click()
    expect(panel.locator("strong").first).to_have_text("nodegroup_delete")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=60_000)
    assert eks.list_nodegroups(clusterName=cluster["name"])["nodegroups"] == []

    # Karpenter: enabled for the group that starts at 0, then disabled after its confirmation.
    karpenter = capacity.locator("#karpenter")
    expect(karpenter.get_by_label("auto-a (0/0)")).to_be_checked()
    expect(karpenter.get_by_label("accelerated-" + TAG, exact=False)).not_to_be_checked()
    karpenter.get_by_label("Consolidate after").fill("30s")
    audit(page, "Capacity with node groups and the Karpenter form")
    karpenter.get_by_role("button", name="Enable Karpenter").click()
    expect(karpenter.locator("#karpenter-state")).to_contain_text("ENABLED", timeout=120_000)
    sm = aws(served, "sagemaker")
    assert sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["AutoScaling"]["Mode"] == "Enable"
    karpenter.get_by_role("button", name="Disable Karpenter…").click()
    page.get_by_role("button", name="Disable Karpenter", exact=True).click()
    expect(karpenter.locator("#karpenter-form")).to_be_visible(timeout=120_000)
    assert sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}").get("AutoScaling", {}).get("Mode") != "Enable"

    # Software update, keyboard only: the button, then the dialog's confirm (focus starts on "Keep").
    tab_to(page, "#software-update")
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Keep")).to_be_focused()
    audit(page, "Capacity with the software update confirmation")
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Update software", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(panel.locator("strong").first).to_have_text("hyperpod_software_update")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=120_000)
    groups = sm.describe_cluster(ClusterName=f"hp-cluster-{TAG}")["InstanceGroups"]
    assert all(g["SoftwareUpdateStatus"] == "Succeeded" for g in groups), groups

    # The rolling update's plan (cluster_update_plan): one node a batch, shown batch by batch; nothing changes.
    software = capacity.locator("#software")
    software.locator("#rolling-batch-value").fill("1")
    software.get_by_role("button", name="Plan").click()
    expect(software.locator("#update-plan")).to_contain_text("batches of 1")
    expect(software.locator("#update-plan tbody tr").first).to_contain_text("1/")
    assert {"cluster_update_plan", "hyperpod_update_lifecycle_script"} <= operations_on_page(page)
    audit(page, "Capacity with a software update plan")
    shot(page, "65-capacity-software-nodegroups-karpenter")
    audit(page, "Capacity after the software update")
    assert {"hyperpod_update_software", "karpenter_get_status", "karpenter_install"} <= operations_on_page(page)
    assert not page.page_errors, page.page_errors
