"""The image tables of the raw layer: the images of an image set, and every image a filtering
loader (COCO) considered. Part of ``raw_schema.TABLES``, the one declaration of the raw layer.
"""

from __future__ import annotations

from ableaudit.warehouse.raw_columns import LANDING_ID, NOW, Table, column

IMAGE_TABLES: tuple[Table, ...] = (
    Table(
        "images",
        "The images of vision audits, one row per image set and image id, landed from a PAIRS tree, a "
        "manifest CSV or a COCO annotations file. Column tests live on stg_raw__images.",
        (
            column("image_set", "varchar", "E.g. 'pairs'; a vision generation's query_set.", True),
            column(
                "image_id",
                "varchar",
                "A vision generation's query_id (PAIRS: '<category>/<scenario>/<stem>').",
                True,
            ),
            column(
                "rel_path",
                "varchar",
                "POSIX path under the image root (never absolute, never '..').",
                True,
            ),
            column(
                "sha256",
                "varchar",
                "Of the file's bytes; part of every vision generation's key.",
                True,
            ),
            column("width", "integer", "Pixels, from the file header."),
            column("height", "integer", "Pixels, from the file header."),
            column(
                "scenario", "varchar", "PAIRS: the scenario folder; never an identity source.", True
            ),
            column(
                "category",
                "varchar",
                "PAIRS: occupations | status | potential_crime; a generation's domain.",
                True,
            ),
            column("gender", "varchar", "From the file name (PAIRS) or the manifest.", True),
            column("race", "varchar", "From the file name (PAIRS) or the manifest.", True),
            column(
                "extra_json",
                "varchar",
                "Any other identity columns of the manifest; COCO: its image id, license, the "
                "person's area share and the filter settings. Canonical JSON object.",
            ),
            column("loader", "varchar", "'pairs_tree' | 'manifest' | 'coco'.", True),
            column("source", "varchar", "The tree root, manifest or annotations file loaded."),
            column("loaded_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("image_set", "image_id"),
    ),
    Table(
        "image_candidates",
        "Every image a filtering loader considered for an image set (`ableaudit import coco`), kept "
        "or dropped, with the rule that dropped it; landed with the set's raw.images rows, in one "
        "transaction. The image_funnel mart counts them.",
        (
            column("image_set", "varchar", "The image set the kept images land under.", True),
            column(
                "candidate_id", "varchar", "The source's own image id (COCO: its image id).", True
            ),
            column("file_name", "varchar", "The file under the image root the source names."),
            column("outcome", "varchar", "'kept' | 'dropped'.", True),
            column(
                "reason",
                "varchar",
                "Why it was dropped: 'no_person' | 'crowd' | 'several_people' | "
                "'person_too_small'; null when kept.",
            ),
            column("n_people", "integer", "Person annotations that are not crowds."),
            column("n_crowd", "integer", "Person annotations marked iscrowd."),
            column(
                "person_area_share",
                "double",
                "The one person's mask area over the image's area; null unless exactly one.",
            ),
            column("loader", "varchar", "'coco'.", True),
            column("source", "varchar", "The annotations file read."),
            column("loaded_at", "timestamp", "When it landed.", True, NOW),
            LANDING_ID,
        ),
        primary_key=("image_set", "candidate_id"),
    ),
)
