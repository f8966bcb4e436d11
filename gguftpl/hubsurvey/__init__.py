"""A publisher's Hub catalog audited at once (``gguftpl survey``).

``listing``: which repos (the Hub's model listing with the ``gguf`` filter, or a file of repo ids) and which
files of each (one per distinct quant family, or all); ``state``: the SQLite file that makes a survey
resumable and a second run re-audit only the repos whose commit changed; ``run``: the survey itself
(``survey()``), its typed results (``SurveyResult``, ``RepoRow``). The output formats are in
``gguftpl/report/survey.py``, chosen from their own registry (``SURVEY_FORMATS``).
"""

from gguftpl.hubsurvey.run import FileRecord, RepoRow, SurveyResult, survey

__all__ = ["FileRecord", "RepoRow", "SurveyResult", "survey"]
