DROP TABLE gaffer.ui_sessions;
