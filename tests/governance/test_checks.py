from django.test import override_settings

from governance.checks import lease_outlives_a_task


def _warrant(**changes):
    from django.conf import settings

    return {**settings.WARRANT, **changes}


def test_it_warns_when_a_lease_could_lapse_between_two_heartbeats():
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False, WARRANT=_warrant(LEASE_SECONDS=6, HEARTBEAT_SECONDS=5)):
        assert [w.id for w in lease_outlives_a_task(None)] == ["governance.W001"]


def test_it_is_quiet_when_the_lease_spans_several_heartbeats():
    # The defaults (15 and 5) are quiet; a step's length no longer matters: the heartbeat covers it.
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False, WARRANT=_warrant(LEASE_SECONDS=15, HEARTBEAT_SECONDS=5)):
        assert lease_outlives_a_task(None) == []


def test_it_warns_when_rate_limits_are_counted_per_process():
    from governance.checks import rate_limits_are_shared

    for per_process in ("locmem.LocMemCache", "dummy.DummyCache"):  # counted alone, or not at all
        with override_settings(CACHES={"default": {"BACKEND": f"django.core.cache.backends.{per_process}"}}):
            assert [w.id for w in rate_limits_are_shared(None)] == ["governance.W004"]
    shared = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6399/1"}}
    with override_settings(CACHES=shared):
        assert rate_limits_are_shared(None) == []


def test_check_deploy_flags_allow_lists_that_allow_too_much():
    from governance.checks import tool_allow_lists_are_narrow

    with override_settings(WARRANT=_warrant(MCP_STDIO_COMMANDS=["mcp-server-time"], PYTHON_TOOL_MODULES=["mytools"],
                                            SECRET_ENV_ALLOWED=["OPENAI_API_KEY"], EGRESS_PRIVATE_NETWORKS=[])):
        assert tool_allow_lists_are_narrow(None) == []
    with override_settings(WARRANT=_warrant(MCP_STDIO_COMMANDS=["mcp-server-time", "/bin/sh", "python3.11"],
                                            PYTHON_TOOL_MODULES=["os", "mytools"], SECRET_ENV_ALLOWED=["*"],
                                            EGRESS_PRIVATE_NETWORKS=["0.0.0.0/0"])):
        found = {w.id: w.msg for w in tool_allow_lists_are_narrow(None)}
    assert set(found) == {"governance.W030", "governance.W031", "governance.W032", "governance.W033"}
    assert "/bin/sh" in found["governance.W030"] and "python3.11" in found["governance.W030"]
    assert "mcp-server-time" not in found["governance.W030"]


def test_check_deploy_warns_when_stdio_servers_run_without_bubblewrap():
    from agents.tools.sandbox import isolation
    from governance.checks import stdio_servers_are_confined

    with override_settings(WARRANT=_warrant(MCP_STDIO_SANDBOX="user")):
        assert [w.id for w in stdio_servers_are_confined(None)] == ["governance.W034"]
    if isolation()["mode"] == "bubblewrap":
        assert stdio_servers_are_confined(None) == []


def test_stored_rows_the_rules_refuse_are_named(db):
    from agents.models import ModelProfile, ToolSource
    from governance.checks import stored_sources_are_allowed

    ModelProfile.objects.create(name="legacy", backend="subprocess.Popen", model="m")
    ToolSource.objects.create(name="shell", kind="mcp_stdio", command=["sh", "-c", "id"])
    with override_settings(WARRANT=_warrant(MCP_STDIO_COMMANDS=[])):
        messages = [w.msg for w in stored_sources_are_allowed(None, databases=["default"])]
    assert any("model profile legacy" in m and "subprocess.Popen" in m for m in messages)
    assert any("tool source shell" in m and "WARRANT_MCP_STDIO_COMMANDS" in m for m in messages)
    assert stored_sources_are_allowed(None, databases=None) == []  # not asked without --database
