"""Engine errors: a stable code plus a message that tells the user what to do."""


class EngineError(Exception):
    code = "engine_error"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class EngineBusy(EngineError):
    code = "busy"


class EngineNotReady(EngineError):
    code = "not_ready"


class ModelNotFound(EngineError):
    code = "model_not_found"
