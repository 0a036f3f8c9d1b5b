def test_scope_accepts_a_user_id_string_like_the_other_surfaces():
    from memlineage.testing import make_manager

    from memlineage_langchain import LineageMemory

    memory = LineageMemory(manager=make_manager(), scope="user_A")
    assert memory.scope is not None and memory.scope.user_id == "user_A"
