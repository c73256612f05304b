"""`podway-dra-allocator`: run the DRA allocator until SIGINT/SIGTERM (active while it holds the lease)."""

from __future__ import annotations

from libs.runtime.service import run_service
from libs.runtime.settings import PodwaySettings
from services.dra_allocator.app import DraAllocatorService


def main() -> None:
    run_service("dra_allocator", PodwaySettings(), DraAllocatorService)


if __name__ == "__main__":
    main()
