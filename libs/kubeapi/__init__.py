"""The Kubernetes REST API as Podway serves it: the resources, discovery, OpenAPI, patches, selectors and the
`Status` and `Table` shapes, all pure; `services/api_server` wires them to admission and the event stream."""
