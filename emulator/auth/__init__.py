"""Authentication and authorization: who a request is, and whether RBAC lets them.

Upstream these are ``k8s.io/apiserver/pkg/authentication`` (users, tokens),
``k8s.io/apiserver/pkg/authorization`` (attributes, decisions) and
``plugin/pkg/auth/authorizer/rbac`` (the RBAC authorizer and its bootstrap
policy). Everything here is pure Python over plain objects; the API server
(:mod:`emulator.apiserver.auth`) wires it to HTTP and to the store.
"""
