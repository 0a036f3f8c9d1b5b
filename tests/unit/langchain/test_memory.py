def test_scope_accepts_a_user_id_string_like_the_other_surfaces():
    from memlineage.testing import make_manager

    from memlineage_langchain import LineageMemory

    memory = LineageMemory(manager=make_manager(), scope="user_A")
    assert memory.scope is not None and memory.scope.user_id == "user_A"


def test_an_erasure_drops_the_raw_input_a_memory_keeps_between_load_and_save(manager, alice) -> None:
    """LineageMemory keeps the user's input from load to save; erasing the user's scope drops it in the process."""
    from memlineage import Scope

    from memlineage_langchain import LineageMemory

    memory = LineageMemory(manager=manager, scope=alice)
    memory.load_memory_variables({"input": "My secret diagnosis is diabetes, where do I live?"})
    assert memory._pending
    manager.erase(scope=Scope(user_id="alice"), reason="GDPR request")
    assert memory._pending == {}
