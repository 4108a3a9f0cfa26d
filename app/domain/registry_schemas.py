"""The request and answer documents of the model registry (/v1/registry/models)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.domain.schemas import NO_CONTROL
from app.domain.services.registry import NAME_PATTERN

Tags = dict[str, str]


class RegisteredModelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Letters, digits, '.', '_' and '-' "
                      "(at most 64, starting with a letter or digit); unique per tenant")
    description: str = Field("", max_length=4000, pattern=NO_CONTROL)


class ModelVersionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL,
                          description="The model to register (its id or a unique prefix)")
    description: str = Field("", max_length=4000, pattern=NO_CONTROL)
    tags: Tags = Field(default_factory=dict, max_length=64,
                       description="String keys and values, e.g. {\"team\": \"risk\"}")


class AliasMoveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, description="The version the alias points at from now on")


class AliasPublic(BaseModel):
    name: str
    alias: str
    version: int
    moved_by: str | None = Field(description="The id of the API key that moved it last")
    moved_at: datetime


class RegisteredModelPublic(BaseModel):
    name: str
    description: str
    latest_version: int | None = Field(description="The highest version there is")
    aliases: dict[str, int] = Field(description="Each alias and the version it points at")
    created_at: datetime


class RegisteredModelsPublic(BaseModel):
    data: list[RegisteredModelPublic]
    count: int


class ModelVersionPublic(BaseModel):
    name: str
    version: int
    model_id: str
    description: str
    tags: Tags
    aliases: list[str] = Field(description="The aliases that point at this version")
    created_by: str | None = Field(description="The id of the API key that registered it")
    created_at: datetime


class ModelVersionsPublic(BaseModel):
    data: list[ModelVersionPublic]
    count: int


class AliasMovePublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    alias: str
    from_version: int | None = Field(description="None: the alias was created by this move")
    to_version: int | None = Field(description="None: the alias was deleted")
    moved_by: str | None
    moved_at: datetime


class AliasHistoryPublic(BaseModel):
    data: list[AliasMovePublic]

