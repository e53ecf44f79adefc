"""A Hugging Face hub stand-in: a small offline set of repos of tiny files (one gated), no network."""

from __future__ import annotations

from dataclasses import dataclass, field


class HubError(Exception):
    """What the hub answers instead of files (status and message as huggingface_hub prints them)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status, self.message = status, message


@dataclass
class Repo:
    """One model repo: files per revision; a gated repo needs `token`."""

    revisions: dict[str, dict[str, bytes]]
    token: str | None = None
    seconds_per_file: float = 0.0  # twin seconds the simulated download spends on each file (0: at once)


GATED_TOKEN = "hf_twinGatedToken0123456789"  # the one token the gated stand-in repo accepts


def _tiny(name: str, layers: int) -> dict[str, bytes]:
    config = f'{{"model_type": "llama", "name": "{name}", "num_hidden_layers": {layers}}}'.encode()
    return {
        "config.json": config,
        "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}',
        "model.safetensors": bytes(range(256)) * (layers * 4),
        "README.md": f"# {name}\nA tiny stand-in model of the twin.\n".encode(),
    }


@dataclass
class Hub:
    """The repos the twin serves; `download` answers like the hub (404 unknown repo or revision, 401 gated)."""

    repos: dict[str, Repo] = field(
        default_factory=lambda: {
            "twin-org/tiny-llama": Repo({"main": _tiny("tiny-llama", 2), "v1": _tiny("tiny-llama-v1", 1)}),
            "twin-org/gated-llama": Repo({"main": _tiny("gated-llama", 3)}, token=GATED_TOKEN),
            # Gated and slow (a file every 10 twin minutes): a download long enough to watch, or to kill mid-way.
            "twin-org/slow-llama": Repo({"main": _tiny("slow-llama", 2)}, token=GATED_TOKEN, seconds_per_file=600.0),
        }
    )

    def pace(self, repo_id: str) -> float:
        """Twin seconds per file the download of `repo_id` takes."""
        repo = self.repos.get(repo_id)
        return repo.seconds_per_file if repo else 0.0

    def download(self, repo_id: str, revision: str, token: str | None) -> dict[str, bytes]:
        """Every file of `repo_id` at `revision`, or HubError."""
        repo = self.repos.get(repo_id)
        if repo is None:
            raise HubError(404, f"Repository Not Found for url: https://huggingface.co/api/models/{repo_id}")
        if repo.token is not None and token != repo.token:
            raise HubError(
                401, f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            )
        files = repo.revisions.get(revision)
        if files is None:
            raise HubError(
                404, f"Revision Not Found for url: https://huggingface.co/api/models/{repo_id}/revision/{revision}"
            )
        return dict(files)


HUB = Hub()
