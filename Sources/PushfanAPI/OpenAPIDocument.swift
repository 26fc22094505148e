/// The OpenAPI 3.1 document of `pushfan api`, served as is at `GET /openapi.json`. Kept by
/// hand beside the routes; `OpenAPIDocumentTests` checks that it names exactly the router's
/// operations, and the API tests that answers match it. docs/api.md explains it.
enum OpenAPIDocument {
    static let json = #"""
{
 "components": {
  "responses": {
   "Forbidden": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "the application secret on a master-only route"
   },
   "Invalid": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "invalid input"
   },
   "Throttled": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "too many failed authentications"
   },
   "Unauthorized": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "no or wrong credentials"
   },
   "Unavailable": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "the store or Kafka is not answering"
   },
   "Unsupported": {
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    },
    "description": "the body is not application/json"
   }
  },
  "schemas": {
   "CampaignStats": {
    "properties": {
     "app": {
      "type": "string"
     },
     "holdout_lift": {
      "properties": {
       "absolute": {
        "type": "number"
       },
       "ci95": {
        "items": {
         "type": "number"
        },
        "maxItems": 2,
        "minItems": 2,
        "type": "array"
       },
       "holdout_rate": {
        "type": "number"
       },
       "treated_rate": {
        "type": "number"
       }
      },
      "required": [
       "treated_rate",
       "holdout_rate",
       "absolute",
       "ci95"
      ],
      "type": "object"
     },
     "id": {
      "type": "string"
     },
     "status": {
      "type": "string"
     },
     "variants": {
      "additionalProperties": {
       "properties": {
        "actions": {
         "additionalProperties": {
          "properties": {
           "devices": {
            "type": "integer"
           },
           "events": {
            "type": "integer"
           }
          },
          "required": [
           "events",
           "devices"
          ],
          "type": "object"
         },
         "type": "object"
        },
        "conversion_rate": {
         "type": [
          "number",
          "null"
         ]
        },
        "conversions": {
         "properties": {
          "devices": {
           "type": "integer"
          },
          "events": {
           "type": "integer"
          },
          "value": {
           "additionalProperties": {
            "type": "number"
           },
           "type": "object"
          }
         },
         "required": [
          "events",
          "devices",
          "value"
         ],
         "type": "object"
        },
        "custom": {
         "additionalProperties": {
          "properties": {
           "devices": {
            "type": "integer"
           },
           "events": {
            "type": "integer"
           }
          },
          "required": [
           "events",
           "devices"
          ],
          "type": "object"
         },
         "type": "object"
        },
        "delivered": {
         "type": "integer"
        },
        "dismissed": {
         "properties": {
          "devices": {
           "type": "integer"
          },
          "events": {
           "type": "integer"
          }
         },
         "required": [
          "events",
          "devices"
         ],
         "type": "object"
        },
        "open_rate": {
         "type": [
          "number",
          "null"
         ]
        },
        "opened": {
         "properties": {
          "devices": {
           "type": "integer"
          },
          "events": {
           "type": "integer"
          }
         },
         "required": [
          "events",
          "devices"
         ],
         "type": "object"
        },
        "outcomes": {
         "additionalProperties": {
          "type": "integer"
         },
         "type": "object"
        },
        "received": {
         "properties": {
          "devices": {
           "type": "integer"
          },
          "events": {
           "type": "integer"
          }
         },
         "required": [
          "events",
          "devices"
         ],
         "type": "object"
        }
       },
       "required": [
        "outcomes",
        "delivered",
        "received",
        "opened",
        "dismissed",
        "actions",
        "custom",
        "conversions",
        "open_rate",
        "conversion_rate"
       ],
       "type": "object"
      },
      "description": "per variant; `holdout` for the holdout, `all` for a campaign without variants",
      "type": "object"
     },
     "winner": {
      "description": "an A/B campaign with a winner: its setting and, once made, the decision with the rates it used",
      "properties": {
       "after_s": {
        "type": "integer"
       },
       "decision": {
        "properties": {
         "at": {
          "type": "integer"
         },
         "devices": {
          "additionalProperties": {
           "type": "integer"
          },
          "type": "object"
         },
         "metric": {
          "type": "string"
         },
         "rates": {
          "additionalProperties": {
           "type": "number"
          },
          "type": "object"
         },
         "variant": {
          "type": "string"
         }
        },
        "type": [
         "object",
         "null"
        ]
       },
       "metric": {
        "enum": [
         "open_rate",
         "conversion_rate"
        ],
        "type": "string"
       },
       "test_percent": {
        "type": "integer"
       }
      },
      "required": [
       "test_percent",
       "after_s",
       "metric",
       "decision"
      ],
      "type": "object"
     }
    },
    "required": [
     "id",
     "app",
     "status",
     "variants"
    ],
    "type": "object"
   },
   "CampaignStatus": {
    "properties": {
     "app": {
      "type": "string"
     },
     "audience": {
      "type": "integer"
     },
     "finished": {
      "type": "integer"
     },
     "id": {
      "type": "string"
     },
     "outcomes": {
      "additionalProperties": {
       "type": "integer"
      },
      "type": "object"
     },
     "send_at": {
      "type": "integer"
     },
     "status": {
      "enum": [
       "scheduled",
       "planning",
       "running",
       "paused",
       "completed",
       "cancelled"
      ]
     }
    },
    "required": [
     "id",
     "app",
     "status",
     "audience",
     "finished",
     "outcomes"
    ],
    "type": "object"
   },
   "Device": {
    "properties": {
     "app_version": {
      "type": [
       "string",
       "null"
      ]
     },
     "attributes": {
      "type": "object"
     },
     "created": {
      "type": "integer"
     },
     "device_id": {
      "type": "string"
     },
     "environment": {
      "type": "string"
     },
     "last_seen": {
      "type": "integer"
     },
     "locale": {
      "type": [
       "string",
       "null"
      ]
     },
     "os_version": {
      "type": [
       "string",
       "null"
      ]
     },
     "quiet_hours": {
      "type": [
       "object",
       "null"
      ]
     },
     "status": {
      "enum": [
       "active",
       "invalid",
       "unregistered"
      ]
     },
     "tags": {
      "items": {
       "type": "string"
      },
      "type": "array"
     },
     "timezone": {
      "type": [
       "string",
       "null"
      ]
     },
     "token": {
      "type": "string"
     }
    },
    "required": [
     "device_id",
     "token",
     "environment",
     "status",
     "tags",
     "attributes"
    ],
    "type": "object"
   },
   "DeviceInput": {
    "properties": {
     "app_version": {
      "type": "string"
     },
     "attributes": {
      "type": "object"
     },
     "device_id": {
      "type": "string"
     },
     "environment": {
      "enum": [
       "production",
       "sandbox"
      ]
     },
     "last_seen": {
      "type": "integer"
     },
     "locale": {
      "type": "string"
     },
     "os_version": {
      "type": "string"
     },
     "quiet_hours": {
      "properties": {
       "end": {
        "description": "HH:MM, local time",
        "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
        "type": "string"
       },
       "start": {
        "description": "HH:MM, local time",
        "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
        "type": "string"
       }
      },
      "required": [
       "start",
       "end"
      ],
      "type": "object"
     },
     "tags": {
      "items": {
       "type": "string"
      },
      "type": "array"
     },
     "timezone": {
      "type": "string"
     },
     "token": {
      "description": "APNs token, hex",
      "type": "string"
     },
     "tokens": {
      "description": "tokens of other kinds than alert, written with the device (each replaces the one of its kind and scope): KindTokenInput plus kind",
      "items": {
       "properties": {
        "activity_id": {
         "description": "1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
         "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
         "type": "string"
        },
        "attributes": {
         "additionalProperties": {
          "maxLength": 256,
          "type": "string"
         },
         "description": "liveactivity_update: the activity's static attributes as strings (names 1 to 128 of A-Z a-z 0-9 . _ : -), which a campaign's audience.activities matches; needs attributes_type",
         "maxProperties": 8,
         "propertyNames": {
          "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$"
         },
         "type": "object"
        },
        "attributes_type": {
         "description": "1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
         "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
         "type": "string"
        },
        "environment": {
         "enum": [
          "production",
          "sandbox"
         ],
         "type": "string"
        },
        "expires_at": {
         "minimum": 100000000000,
         "type": "integer"
        },
        "kind": {
         "enum": [
          "voip",
          "liveactivity_start",
          "liveactivity_update",
          "widgets",
          "controls",
          "complication",
          "fileprovider",
          "location",
          "pushtotalk"
         ],
         "type": "string"
        },
        "token": {
         "pattern": "^([0-9a-fA-F]{2}){16,200}$",
         "type": "string"
        }
       },
       "required": [
        "kind",
        "token"
       ],
       "type": "object"
      },
      "maxItems": 32,
      "type": "array"
     },
     "user_id": {
      "description": "kept as attribute user_id",
      "type": "string"
     }
    },
    "required": [
     "token"
    ],
    "type": "object"
   },
   "Error": {
    "properties": {
     "error": {
      "properties": {
       "code": {
        "type": "string"
       },
       "field": {
        "type": "string"
       },
       "message": {
        "type": "string"
       }
      },
      "required": [
       "code",
       "message"
      ],
      "type": "object"
     }
    },
    "required": [
     "error"
    ],
    "type": "object"
   },
   "EventBatch": {
    "additionalProperties": false,
    "properties": {
     "events": {
      "items": {
       "$ref": "#/components/schemas/EventInput"
      },
      "maxItems": 1000,
      "minItems": 1,
      "type": "array"
     }
    },
    "required": [
     "events"
    ],
    "type": "object"
   },
   "EventInput": {
    "additionalProperties": false,
    "description": "one engagement event; the marker's fields (campaign, send_id, variant) as the push carried them",
    "properties": {
     "action": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     },
     "at": {
      "description": "when it happened on the device, epoch milliseconds",
      "minimum": 100000000000,
      "type": "integer"
     },
     "campaign": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     },
     "currency": {
      "pattern": "^[A-Z]{3}$",
      "type": "string"
     },
     "device_id": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     },
     "id": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     },
     "kind": {
      "enum": [
       "received",
       "opened",
       "action",
       "dismissed",
       "converted",
       "custom"
      ],
      "type": "string"
     },
     "name": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     },
     "send_id": {
      "pattern": "^[0-9a-f]{16}$",
      "type": "string"
     },
     "value": {
      "maximum": 1000000000000.0,
      "minimum": 0,
      "type": "number"
     },
     "variant": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     }
    },
    "required": [
     "kind",
     "device_id",
     "at"
    ],
    "type": "object"
   },
   "EventsAccepted": {
    "properties": {
     "accepted": {
      "type": "integer"
     },
     "ids": {
      "items": {
       "type": "string"
      },
      "type": "array"
     }
    },
    "required": [
     "accepted",
     "ids"
    ],
    "type": "object"
   },
   "InvalidEvents": {
    "properties": {
     "error": {
      "properties": {
       "code": {
        "type": "string"
       },
       "events": {
        "items": {
         "properties": {
          "field": {
           "type": "string"
          },
          "index": {
           "type": "integer"
          },
          "message": {
           "type": "string"
          }
         },
         "required": [
          "index",
          "field",
          "message"
         ],
         "type": "object"
        },
        "type": "array"
       },
       "field": {
        "type": "string"
       },
       "message": {
        "type": "string"
       }
      },
      "required": [
       "code",
       "message"
      ],
      "type": "object"
     }
    },
    "required": [
     "error"
    ],
    "type": "object"
   },
   "KindToken": {
    "properties": {
     "activity_id": {
      "type": "string"
     },
     "attributes": {
      "additionalProperties": {
       "type": "string"
      },
      "type": "object"
     },
     "attributes_type": {
      "type": "string"
     },
     "created": {
      "type": "integer"
     },
     "environment": {
      "enum": [
       "production",
       "sandbox"
      ],
      "type": "string"
     },
     "expires_at": {
      "type": [
       "integer",
       "null"
      ]
     },
     "invalid_reason": {
      "type": [
       "string",
       "null"
      ]
     },
     "kind": {
      "type": "string"
     },
     "last_seen": {
      "type": "integer"
     },
     "status": {
      "description": "active, invalid (APNs refused it) or retired (its Live Activity ended)",
      "enum": [
       "active",
       "invalid",
       "retired"
      ],
      "type": "string"
     },
     "token": {
      "type": "string"
     }
    },
    "required": [
     "kind",
     "token",
     "environment",
     "status",
     "created",
     "last_seen"
    ],
    "type": "object"
   },
   "KindTokenInput": {
    "additionalProperties": false,
    "description": "a token of one kind; attributes_type only for Live Activity tokens (required for liveactivity_start), activity_id and attributes only for liveactivity_update (activity_id required there)",
    "properties": {
     "activity_id": {
      "description": "liveactivity_update: the activity the token updates; 1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
      "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
      "type": "string"
     },
     "attributes": {
      "additionalProperties": {
       "maxLength": 256,
       "type": "string"
      },
      "description": "liveactivity_update: the activity's static attributes as strings (names 1 to 128 of A-Z a-z 0-9 . _ : -), which a campaign's audience.activities matches; needs attributes_type",
      "maxProperties": 8,
      "propertyNames": {
       "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$"
      },
      "type": "object"
     },
     "attributes_type": {
      "description": "liveactivity_start: the ActivityAttributes type the token starts (required); liveactivity_update: the type of the activity it updates (optional, for audience.activities); 1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
      "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
      "type": "string"
     },
     "environment": {
      "description": "default: the device's",
      "enum": [
       "production",
       "sandbox"
      ],
      "type": "string"
     },
     "expires_at": {
      "description": "ms since the epoch after which it is not sent to (a Live Activity's end)",
      "minimum": 100000000000,
      "type": "integer"
     },
     "token": {
      "description": "hex, as APNs issued it (16 to 200 bytes)",
      "pattern": "^([0-9a-fA-F]{2}){16,200}$",
      "type": "string"
     }
    },
    "required": [
     "token"
    ],
    "type": "object"
   },
   "KindTokenRegistered": {
    "properties": {
     "created": {
      "type": "boolean"
     },
     "device": {
      "type": "string"
     },
     "kind": {
      "type": "string"
     }
    },
    "required": [
     "device",
     "kind",
     "created"
    ],
    "type": "object"
   },
   "Message": {
    "properties": {
     "message": {
      "type": "string"
     }
    },
    "required": [
     "message"
    ],
    "type": "object"
   },
   "MessageAccepted": {
    "properties": {
     "devices": {
      "minimum": 1,
      "type": "integer"
     },
     "message": {
      "description": "the message id (msg- and 32 hex digits): its results carry it as their campaign",
      "type": "string"
     },
     "recipients": {
      "items": {
       "properties": {
        "alias": {
         "additionalProperties": {
          "type": "string"
         },
         "type": "object"
        },
        "device": {
         "type": "string"
        },
        "devices": {
         "description": "the recipient's active devices, each sent the message once",
         "items": {
          "type": "string"
         },
         "type": "array"
        },
        "error": {
         "enum": [
          "unknown_user",
          "unknown_alias",
          "unknown_device"
         ],
         "type": "string"
        },
        "message": {
         "type": "string"
        },
        "not_sent": {
         "items": {
          "properties": {
           "device": {
            "type": "string"
           },
           "status": {
            "enum": [
             "invalid",
             "unregistered"
            ],
            "type": "string"
           }
          },
          "type": "object"
         },
         "type": "array"
        },
        "user": {
         "type": "string"
        }
       },
       "type": "object"
      },
      "type": "array"
     },
     "status": {
      "enum": [
       "accepted"
      ],
      "type": "string"
     }
    },
    "required": [
     "message",
     "status",
     "devices",
     "recipients"
    ],
    "type": "object"
   },
   "NotificareDevice": {
    "properties": {
     "allowedUI": {
      "type": [
       "boolean",
       "null"
      ]
     },
     "appVersion": {
      "type": [
       "string",
       "null"
      ]
     },
     "deviceID": {
      "type": [
       "string",
       "null"
      ]
     },
     "deviceString": {
      "type": [
       "string",
       "null"
      ]
     },
     "language": {
      "type": [
       "string",
       "null"
      ]
     },
     "oldDeviceID": {
      "type": [
       "string",
       "null"
      ]
     },
     "osVersion": {
      "type": [
       "string",
       "null"
      ]
     },
     "region": {
      "type": [
       "string",
       "null"
      ]
     },
     "sdkVersion": {
      "type": [
       "string",
       "null"
      ]
     },
     "timeZoneOffset": {
      "maximum": 14,
      "minimum": -14,
      "type": [
       "number",
       "null"
      ]
     },
     "transport": {
      "type": [
       "string",
       "null"
      ]
     },
     "userID": {
      "type": [
       "string",
       "null"
      ]
     },
     "userName": {
      "type": [
       "string",
       "null"
      ]
     }
    },
    "type": "object"
   },
   "Registered": {
    "properties": {
     "created": {
      "type": "boolean"
     },
     "device": {
      "type": "string"
     },
     "token_moved_from": {
      "items": {
       "type": "string"
      },
      "type": "array"
     }
    },
    "required": [
     "device",
     "created"
    ],
    "type": "object"
   },
   "Submitted": {
    "properties": {
     "campaign": {
      "type": "string"
     },
     "status": {
      "const": "submitted"
     },
     "submission": {
      "properties": {
       "offset": {
        "type": "integer"
       },
       "partition": {
        "type": "integer"
       }
      },
      "type": "object"
     }
    },
    "required": [
     "campaign",
     "status",
     "submission"
    ],
    "type": "object"
   },
   "TransactionalMessage": {
    "additionalProperties": false,
    "properties": {
     "notification": {
      "description": "a campaign's notification (docs/messages.md): texts per locale, templates, personalisation",
      "type": "object"
     },
     "options": {
      "additionalProperties": false,
      "properties": {
       "attribution_window_s": {
        "type": "integer"
       },
       "collapse_id": {
        "maxLength": 64,
        "type": "string"
       },
       "dry_run": {
        "type": "boolean"
       },
       "expiration": {
        "type": "integer"
       },
       "ignore_frequency_caps": {
        "default": true,
        "type": "boolean"
       },
       "ignore_quiet_hours": {
        "default": true,
        "type": "boolean"
       },
       "priority": {
        "enum": [
         1,
         5,
         10
        ],
        "type": "integer"
       }
      },
      "type": "object"
     },
     "recipients": {
      "additionalProperties": false,
      "description": "1 to 1,000 users, aliases and devices in all",
      "properties": {
       "aliases": {
        "additionalProperties": {
         "items": {
          "minLength": 1,
          "type": "string"
         },
         "type": "array"
        },
        "type": "object"
       },
       "devices": {
        "items": {
         "minLength": 1,
         "type": "string"
        },
        "type": "array"
       },
       "users": {
        "items": {
         "minLength": 1,
         "type": "string"
        },
        "type": "array"
       }
      },
      "type": "object"
     }
    },
    "required": [
     "recipients",
     "notification"
    ],
    "type": "object"
   },
   "User": {
    "properties": {
     "aliases": {
      "additionalProperties": {
       "type": "string"
      },
      "description": "alias name → value; each value names one user of the app",
      "type": "object"
     },
     "devices": {
      "description": "the app's devices whose user_id attribute is this user, any status, up to 100",
      "items": {
       "$ref": "#/components/schemas/Device"
      },
      "type": "array"
     },
     "user_id": {
      "type": "string"
     }
    },
    "required": [
     "user_id",
     "aliases",
     "devices"
    ],
    "type": "object"
   }
  },
  "securitySchemes": {
   "adminToken": {
    "description": "the admin token of pushfan api --admin-token-file",
    "scheme": "bearer",
    "type": "http"
   },
   "appSecret": {
    "description": "app key : application or master secret",
    "scheme": "basic",
    "type": "http"
   },
   "dashboardAdmin": {
    "description": "user admin, password the admin token (what a browser's prompt sends)",
    "scheme": "basic",
    "type": "http"
   },
   "masterSecret": {
    "description": "app key : master secret",
    "scheme": "basic",
    "type": "http"
   }
  }
 },
 "info": {
  "description": "Device registration and campaigns (docs/api.md). HTTP Basic: app key and its master or application secret.",
  "title": "Pushfan API",
  "version": "1"
 },
 "openapi": "3.1.0",
 "paths": {
  "/application/info": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "application"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: the application"
   }
  },
  "/dashboard": {
   "get": {
    "parameters": [
     {
      "description": "the campaign whose send rate to include (default: the most recently active)",
      "in": "query",
      "name": "campaign",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "text/html": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "the page, with the current snapshot"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     },
     {
      "dashboardAdmin": []
     },
     {
      "masterSecret": []
     }
    ],
    "summary": "The live dashboard page (docs/metrics.md)"
   }
  },
  "/dashboard/chart.js": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "text/javascript": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "the library"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "Chart.js is not installed"
     }
    },
    "security": [],
    "summary": "Chart.js, as installed (libjs-chart.js)"
   }
  },
  "/dashboard/dashboard.js": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "text/javascript": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "the script"
     }
    },
    "security": [],
    "summary": "The dashboard page's script"
   }
  },
  "/dashboard/events": {
   "get": {
    "parameters": [
     {
      "description": "the campaign whose send rate to include (default: the most recently active)",
      "in": "query",
      "name": "campaign",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "text/event-stream": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "an endless stream"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     },
     {
      "dashboardAdmin": []
     },
     {
      "masterSecret": []
     }
    ],
    "summary": "The dashboard's snapshots as Server-Sent Events (event snapshot), with heartbeat comments when nothing changes"
   }
  },
  "/dashboard/state": {
   "get": {
    "parameters": [
     {
      "description": "the campaign whose send rate to include (default: the most recently active)",
      "in": "query",
      "name": "campaign",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "required": [
          "at",
          "campaigns",
          "apps",
          "deadLetters"
         ],
         "type": "object"
        }
       }
      },
      "description": "the snapshot"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     },
     {
      "dashboardAdmin": []
     },
     {
      "masterSecret": []
     }
    ],
    "summary": "The dashboard's snapshot: campaigns, the chosen campaign's send rate, apps' rates against their limits, dead letters (admin only)"
   }
  },
  "/device": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "allOf": [
         {
          "$ref": "#/components/schemas/NotificareDevice"
         },
         {
          "properties": {
           "deviceID": {
            "minLength": 1,
            "type": "string"
           }
          },
          "required": [
           "deviceID"
          ],
          "type": "object"
         }
        ]
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "registered"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: register a device"
   }
  },
  "/device/{device}": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "deactivated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: delete a device"
   },
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/NotificareDevice"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: update a device"
   }
  },
  "/device/{device}/addtag": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "tag": {
          "type": "string"
         }
        },
        "required": [
         "tag"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: addtag"
   }
  },
  "/device/{device}/addtags": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "tags": {
          "items": {
           "type": "string"
          },
          "type": "array"
         }
        },
        "required": [
         "tags"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: addtags"
   }
  },
  "/device/{device}/cleardnd": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: cleardnd"
   }
  },
  "/device/{device}/cleartags": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: cleartags"
   }
  },
  "/device/{device}/dnd": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "dnd"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: do-not-disturb"
   },
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "end": {
          "description": "HH:MM, local time",
          "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
          "type": "string"
         },
         "start": {
          "description": "HH:MM, local time",
          "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
          "type": "string"
         }
        },
        "required": [
         "start",
         "end"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: set do-not-disturb"
   }
  },
  "/device/{device}/removetag": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "tag": {
          "type": "string"
         }
        },
        "required": [
         "tag"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: removetag"
   }
  },
  "/device/{device}/removetags": {
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "tags": {
          "items": {
           "type": "string"
          },
          "type": "array"
         }
        },
        "required": [
         "tags"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: removetags"
   }
  },
  "/device/{device}/tags": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "tags"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: tags"
   },
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/device/{device}/userdata": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "user data"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: user data"
   },
   "parameters": [
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": {
         "type": [
          "string",
          "null"
         ]
        },
        "propertyNames": {
         "pattern": "^[A-Za-z0-9._-]{1,55}$"
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "updated"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: set user data"
   }
  },
  "/event": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "data": {
          "type": [
           "object",
           "null"
          ]
         },
         "deviceID": {
          "minLength": 1,
          "type": "string"
         },
         "notification": {
          "description": "the push's id (its payload's id or notificationId); required for notification events",
          "type": [
           "string",
           "null"
          ]
         },
         "sessionID": {
          "type": [
           "string",
           "null"
          ]
         },
         "timestamp": {
          "description": "milliseconds since the epoch",
          "type": "integer"
         },
         "type": {
          "description": "re.notifica.event.notification.Receive and .Open are counted as received and opened, re.notifica.event.custom.<name> as a custom event; other types are taken and not counted",
          "minLength": 1,
          "type": "string"
         },
         "userID": {
          "type": [
           "string",
           "null"
          ]
         }
        },
        "required": [
         "type",
         "timestamp",
         "deviceID"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "202": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "accepted"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no campaign of the app has this notification id, or the app has no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "another variant than the device's, a time too far ahead, or a custom name that is not an identifier"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: an event (notification receipts, opens and custom events are counted per campaign and variant)"
   }
  },
  "/healthz": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "status": {
           "const": "ok"
          }
         },
         "type": "object"
        }
       }
      },
      "description": "ok"
     }
    },
    "security": [],
    "summary": "The process answers"
   }
  },
  "/live-activity": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "activity": {
          "description": "the id the app chose for the activity: 1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
          "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
          "type": "string"
         },
         "deviceID": {
          "description": "1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..",
          "pattern": "^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$",
          "type": "string"
         },
         "token": {
          "description": "the activity's update token, hex (16 to 200 bytes)",
          "pattern": "^([0-9a-fA-F]{2}){16,200}$",
          "type": "string"
         },
         "topics": {
          "items": {
           "type": "string"
          },
          "type": "array"
         }
        },
        "required": [
         "activity",
         "token",
         "deviceID"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "done"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: a Live Activity's update token, kept under the activity's id"
   }
  },
  "/live-activity/{activity}/{device}": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "done"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: a Live Activity ended (its token is removed; an unknown one is not an error)"
   },
   "parameters": [
    {
     "in": "path",
     "name": "activity",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/metrics": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "text/plain": {
        "schema": {
         "type": "string"
        }
       }
      },
      "description": "text exposition format"
     }
    },
    "security": [],
    "summary": "Prometheus metrics of the API"
   }
  },
  "/notification/{notification}": {
   "get": {
    "parameters": [
     {
      "in": "header",
      "name": "Accept-Language",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "notification": {
           "properties": {
            "_id": {
             "type": "string"
            },
            "actions": {
             "items": {
              "properties": {
               "camera": {
                "type": "boolean"
               },
               "destructive": {
                "type": "boolean"
               },
               "keyboard": {
                "type": "boolean"
               },
               "label": {
                "type": "string"
               },
               "type": {
                "type": "string"
               }
              },
              "required": [
               "type",
               "label"
              ],
              "type": "object"
             },
             "type": "array"
            },
            "attachments": {
             "items": {
              "properties": {
               "mimeType": {
                "type": "string"
               },
               "uri": {
                "type": "string"
               }
              },
              "required": [
               "mimeType",
               "uri"
              ],
              "type": "object"
             },
             "type": "array"
            },
            "content": {
             "type": "array"
            },
            "extra": {
             "type": "object"
            },
            "message": {
             "type": "string"
            },
            "subtitle": {
             "type": "string"
            },
            "time": {
             "description": "ISO 8601 with milliseconds, UTC",
             "type": "string"
            },
            "title": {
             "type": "string"
            },
            "type": {
             "type": "string"
            }
           },
           "required": [
            "_id",
            "type",
            "time",
            "message",
            "content",
            "actions",
            "attachments",
            "extra"
           ],
           "type": "object"
          }
         },
         "required": [
          "notification"
         ],
         "type": "object"
        }
       }
      },
      "description": "the notification, its texts in the Accept-Language's language"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no campaign or variant of the app has this id"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: the notification a push names, as the SDK shows it when opened"
   },
   "parameters": [
    {
     "in": "path",
     "name": "notification",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/openapi.json": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "the OpenAPI document"
     }
    },
    "security": [],
    "summary": "This document"
   }
  },
  "/readyz": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "ready"
     },
     "503": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "not ready"
     }
    },
    "security": [],
    "summary": "The store and Kafka answer"
   }
  },
  "/reply": {
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "data": {
          "type": [
           "object",
           "null"
          ]
         },
         "deviceID": {
          "minLength": 1,
          "type": "string"
         },
         "label": {
          "description": "the action's identifier (the label GET /notification gave it); 404 when the notification has no such action",
          "minLength": 1,
          "type": "string"
         },
         "notification": {
          "minLength": 1,
          "type": "string"
         },
         "userID": {
          "type": [
           "string",
           "null"
          ]
         }
        },
        "required": [
         "notification",
         "deviceID",
         "label"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Message"
        }
       }
      },
      "description": "counted as an action event"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no campaign of the app has this notification id, it has no such action, or the app has no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "another variant than the device's"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Notificare SDK: a reply to a notification's action (counted as an action event)"
   }
  },
  "/v1/admin/apps": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "apps"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Every app (admin)"
   },
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "allOf": [
         {
          "properties": {
           "cert": {
            "type": "string"
           },
           "cert_key": {
            "type": [
             "string",
             "null"
            ]
           },
           "key_file": {
            "type": "string"
           },
           "key_id": {
            "type": "string"
           },
           "team_id": {
            "type": "string"
           }
          },
          "type": "object"
         },
         {
          "properties": {
           "app": {
            "type": "string"
           },
           "environment": {
            "enum": [
             "production",
             "sandbox"
            ]
           },
           "frequency_caps": {
            "items": {
             "pattern": "^[0-9]{1,4}/[0-9]{1,5}[mhd]$",
             "type": "string"
            },
            "maxItems": 10,
            "type": [
             "array",
             "null"
            ]
           },
           "frequency_caps_per": {
            "description": "whose pushes frequency_caps count (default device)",
            "enum": [
             "device",
             "user",
             null
            ],
            "type": [
             "string",
             "null"
            ]
           },
           "rate": {
            "maximum": 1000000,
            "minimum": 1,
            "type": "integer"
           },
           "time_zone": {
            "type": [
             "string",
             "null"
            ]
           },
           "topic": {
            "type": "string"
           }
          },
          "required": [
           "app",
           "topic"
          ],
          "type": "object"
         }
        ]
       }
      }
     },
     "required": true
    },
    "responses": {
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "created",
      "headers": {
       "Location": {
        "schema": {
         "type": "string"
        }
       }
      }
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the app exists"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the credentials cannot be used"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Create an app; its secrets are in the answer, once (admin)"
   }
  },
  "/v1/admin/apps/{app}": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "the app"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "One app (admin)"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/admin/apps/{app}/credentials": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "cert": {
          "type": "string"
         },
         "cert_key": {
          "type": [
           "string",
           "null"
          ]
         },
         "key_file": {
          "type": "string"
         },
         "key_id": {
          "type": "string"
         },
         "team_id": {
          "type": "string"
         }
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "replaced"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the credentials cannot be used"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Replace an app's APNs credentials (admin)"
   }
  },
  "/v1/admin/apps/{app}/default_category": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "category": {
          "pattern": "^[ -~]{1,255}$",
          "type": [
           "string",
           "null"
          ]
         }
        },
        "required": [
         "category"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "changed"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Set or remove (null) the category of an app's alert campaigns that name none (admin)"
   }
  },
  "/v1/admin/apps/{app}/frequency_caps": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "caps": {
          "items": {
           "pattern": "^[0-9]{1,4}/[0-9]{1,5}[mhd]$",
           "type": "string"
          },
          "maxItems": 10,
          "type": "array"
         },
         "per": {
          "default": "device",
          "description": "whose pushes the caps count: each device's, or each user's across its devices",
          "enum": [
           "device",
           "user"
          ],
          "type": "string"
         }
        },
        "required": [
         "caps"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "changed"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Set an app's frequency caps, PUSHES/WINDOW rules such as 3/1d and 1/1h; an empty list removes them (admin)"
   }
  },
  "/v1/admin/apps/{app}/rate": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "rate": {
          "maximum": 1000000,
          "minimum": 1,
          "type": "integer"
         }
        },
        "required": [
         "rate"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "changed"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Change an app's rate (admin)"
   }
  },
  "/v1/admin/apps/{app}/secrets/{which}/rotate": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "which",
     "required": true,
     "schema": {
      "enum": [
       "master",
       "application"
      ]
     }
    }
   ],
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "grace_s": {
          "maximum": 2592000,
          "minimum": 0,
          "type": "integer"
         }
        },
        "type": "object"
       }
      }
     },
     "required": false
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "the new secret"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Rotate a secret; the old one works for grace_s more (admin)"
   }
  },
  "/v1/admin/keys": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "keys": {
           "items": {
            "properties": {
             "app": {
              "type": [
               "string",
               "null"
              ]
             },
             "created_at": {
              "type": "integer"
             },
             "id": {
              "type": "string"
             },
             "name": {
              "type": "string"
             },
             "revoked_at": {
              "type": [
               "integer",
               "null"
              ]
             },
             "role": {
              "enum": [
               "admin",
               "campaigns:write",
               "read-only"
              ],
              "type": "string"
             }
            },
            "required": [
             "id",
             "name",
             "role",
             "app",
             "created_at",
             "revoked_at"
            ],
            "type": "object"
           },
           "type": "array"
          }
         },
         "required": [
          "keys"
         ],
         "type": "object"
        }
       }
      },
      "description": "keys"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Every scoped key, revoked ones too; never a secret (admin or read-only key)"
   },
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "app": {
          "type": "string"
         },
         "name": {
          "maxLength": 128,
          "minLength": 1,
          "type": "string"
         },
         "role": {
          "enum": [
           "admin",
           "campaigns:write",
           "read-only"
          ],
          "type": "string"
         }
        },
        "required": [
         "name",
         "role"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "app": {
           "type": [
            "string",
            "null"
           ]
          },
          "created_at": {
           "type": "integer"
          },
          "id": {
           "type": "string"
          },
          "key": {
           "description": "pfk_<id>_<secret>, shown once",
           "type": "string"
          },
          "name": {
           "type": "string"
          },
          "revoked_at": {
           "type": [
            "integer",
            "null"
           ]
          },
          "role": {
           "enum": [
            "admin",
            "campaigns:write",
            "read-only"
           ],
           "type": "string"
          }
         },
         "required": [
          "id",
          "name",
          "role",
          "app",
          "created_at",
          "revoked_at",
          "key"
         ],
         "type": "object"
        }
       }
      },
      "description": "the key"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Makes a scoped key: admin, campaigns:write for one app, or read-only; the key is in this answer only (admin)"
   }
  },
  "/v1/admin/keys/{id}": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "id": {
           "type": "string"
          },
          "revoked": {
           "type": "boolean"
          }
         },
         "required": [
          "id",
          "revoked"
         ],
         "type": "object"
        }
       }
      },
      "description": "revoked"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such key, or revoked already"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "Revokes a scoped key at once (admin)"
   },
   "parameters": [
    {
     "in": "path",
     "name": "id",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/admin/operator-log": {
   "get": {
    "parameters": [
     {
      "description": "entries after this sequence number",
      "in": "query",
      "name": "after",
      "required": false,
      "schema": {
       "minimum": 0,
       "type": "integer"
      }
     },
     {
      "description": "at most this many entries (default 100)",
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 1000,
       "minimum": 1,
       "type": "integer"
      }
     },
     {
      "description": "only calls about this app",
      "in": "query",
      "name": "app",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "entries": {
           "items": {
            "properties": {
             "action": {
              "type": "string"
             },
             "actor": {
              "type": "string"
             },
             "app": {
              "type": [
               "string",
               "null"
              ]
             },
             "at": {
              "description": "epoch milliseconds",
              "type": "integer"
             },
             "client": {
              "type": "string"
             },
             "seq": {
              "type": "integer"
             },
             "status": {
              "type": "integer"
             },
             "target": {
              "type": "string"
             }
            },
            "required": [
             "seq",
             "at",
             "actor",
             "client",
             "action",
             "app",
             "target",
             "status"
            ],
            "type": "object"
           },
           "type": "array"
          },
          "next": {
           "type": "integer"
          }
         },
         "required": [
          "entries"
         ],
         "type": "object"
        }
       }
      },
      "description": "entries, oldest first; `next` when there may be more"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "adminToken": []
     }
    ],
    "summary": "The operator log: who changed apps, campaigns, templates and segments, from where, with what outcome (admin; append-only)"
   }
  },
  "/v1/apps/{app}/aliases/{name}/{value}": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "alias": {
           "additionalProperties": {
            "type": "string"
           },
           "type": "object"
          },
          "user_id": {
           "type": "string"
          }
         },
         "required": [
          "user_id",
          "alias"
         ],
         "type": "object"
        }
       }
      },
      "description": "the user"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no user of the app has that alias"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "The user an alias names"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "an alias name",
     "in": "path",
     "name": "name",
     "required": true,
     "schema": {
      "minLength": 1,
      "pattern": "^[a-z0-9_]{1,32}$",
      "type": "string"
     }
    },
    {
     "description": "the alias value",
     "in": "path",
     "name": "value",
     "required": true,
     "schema": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/campaigns": {
   "get": {
    "parameters": [
     {
      "in": "query",
      "name": "limit",
      "required": false,
      "schema": {
       "maximum": 1000,
       "minimum": 1,
       "type": "integer"
      }
     },
     {
      "in": "query",
      "name": "status",
      "required": false,
      "schema": {
       "enum": [
        "scheduled",
        "planning",
        "running",
        "paused",
        "completed",
        "cancelled"
       ]
      }
     },
     {
      "description": "the last id of the page before (from `next`)",
      "in": "query",
      "name": "after",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "campaigns": {
           "items": {
            "type": "object"
           },
           "type": "array"
          }
         },
         "required": [
          "campaigns"
         ],
         "type": "object"
        }
       }
      },
      "description": "campaigns"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "The app's newest campaigns"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "parameters": [
     {
      "in": "header",
      "name": "Idempotency-Key",
      "required": false,
      "schema": {
       "maxLength": 255,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "202": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Submitted"
        }
       }
      },
      "description": "produced to the campaigns topic",
      "headers": {
       "Location": {
        "schema": {
         "type": "string"
        }
       }
      }
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the Idempotency-Key's first request is still running, or the key was used with another body"
     },
     "413": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "too large"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "another app's campaign, or something it names that the app does not have"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Submit a campaign (docs/messages.md)"
   }
  },
  "/v1/apps/{app}/campaigns/{campaign}": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/CampaignStatus"
        }
       }
      },
      "description": "the campaign"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such campaign"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A campaign's status and counts"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "campaign",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/campaigns/{campaign}/stats": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/CampaignStats"
        }
       }
      },
      "description": "the stats"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such campaign"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A campaign's outcomes and engagement per variant, its rates and the holdout's lift"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "campaign",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/campaigns/{campaign}/{action}": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "campaign",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "action",
     "required": true,
     "schema": {
      "enum": [
       "cancel",
       "pause",
       "resume"
      ]
     }
    }
   ],
   "post": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "decided"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such campaign"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "not applicable in its status"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Cancel, pause or resume a campaign"
   }
  },
  "/v1/apps/{app}/channels": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "channels": {
           "items": {
            "properties": {
             "channel_id": {
              "description": "the id APNs made: base64, may hold / + =",
              "type": "string"
             },
             "created_at": {
              "description": "ms since the epoch",
              "type": "integer"
             },
             "environment": {
              "enum": [
               "production",
               "sandbox"
              ]
             },
             "message_storage_policy": {
              "enum": [
               "none",
               "most_recent"
              ]
             }
            },
            "required": [
             "channel_id",
             "message_storage_policy",
             "environment",
             "created_at"
            ],
            "type": "object"
           },
           "type": "array"
          }
         },
         "required": [
          "channels"
         ],
         "type": "object"
        }
       }
      },
      "description": "channels"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "The app's iOS 18 broadcast channels, oldest first"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": false,
        "properties": {
         "message_storage_policy": {
          "description": "default none",
          "enum": [
           "none",
           "most_recent"
          ]
         }
        },
        "type": "object"
       }
      }
     },
     "required": false
    },
    "responses": {
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "channel_id": {
           "description": "the id APNs made: base64, may hold / + =",
           "type": "string"
          },
          "created_at": {
           "description": "ms since the epoch",
           "type": "integer"
          },
          "environment": {
           "enum": [
            "production",
            "sandbox"
           ]
          },
          "message_storage_policy": {
           "enum": [
            "none",
            "most_recent"
           ]
          }
         },
         "required": [
          "channel_id",
          "message_storage_policy",
          "environment",
          "created_at"
         ],
         "type": "object"
        }
       }
      },
      "description": "created",
      "headers": {
       "Location": {
        "schema": {
         "type": "string"
        }
       }
      }
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the app's credentials do not load"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "502": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "APNs refused (apns_refused, with its status and reason)"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Create a broadcast channel at APNs with the app's credentials (docs/apns.md)"
   }
  },
  "/v1/apps/{app}/channels/{channel}": {
   "delete": {
    "responses": {
     "204": {
      "description": "deleted"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the app has no such channel"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the app's credentials do not load"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "502": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "APNs refused (apns_refused, with its status and reason)"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Delete a broadcast channel at APNs and in the store (irreversible)"
   },
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "channel_id": {
           "description": "the id APNs made: base64, may hold / + =",
           "type": "string"
          },
          "created_at": {
           "description": "ms since the epoch",
           "type": "integer"
          },
          "environment": {
           "enum": [
            "production",
            "sandbox"
           ]
          },
          "message_storage_policy": {
           "enum": [
            "none",
            "most_recent"
           ]
          }
         },
         "required": [
          "channel_id",
          "message_storage_policy",
          "environment",
          "created_at"
         ],
         "type": "object"
        }
       }
      },
      "description": "channel"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the app has no such channel"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "One broadcast channel of the app"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the channel id, percent-encoded",
     "in": "path",
     "name": "channel",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/devices/{device}": {
   "delete": {
    "responses": {
     "204": {
      "description": "unregistered"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Unregister a device"
   },
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Read a device"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "parameters": [
     {
      "description": "with the application secret: the device that holds this token now, to move it here",
      "in": "query",
      "name": "previous_device_id",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/DeviceInput"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Registered"
        }
       }
      },
      "description": "updated"
     },
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Registered"
        }
       }
      },
      "description": "registered"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such app"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the token is registered to another device (application secret without previous_device_id)"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Register or update a device"
   }
  },
  "/v1/apps/{app}/devices/{device}/attributes": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "patch": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "maxProperties": 20,
        "propertyNames": {
         "pattern": "^[A-Za-z0-9._-]{1,64}$"
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Set attributes (null removes one)"
   }
  },
  "/v1/apps/{app}/devices/{device}/erase": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "device": {
           "type": "string"
          },
          "erased": {
           "type": "boolean"
          }
         },
         "required": [
          "device",
          "erased"
         ],
         "type": "object"
        }
       }
      },
      "description": "erased"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Erase one device and everything kept about it, with a tombstone on the results and events topics"
   }
  },
  "/v1/apps/{app}/devices/{device}/quiet_hours": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Clear quiet hours"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "end": {
          "description": "HH:MM, local time",
          "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
          "type": "string"
         },
         "start": {
          "description": "HH:MM, local time",
          "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
          "type": "string"
         }
        },
        "required": [
         "start",
         "end"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Set quiet hours"
   }
  },
  "/v1/apps/{app}/devices/{device}/tags/{tag}": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Remove a tag"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "tag",
     "required": true,
     "schema": {
      "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]{1,16}$",
      "type": "string"
     }
    }
   ],
   "put": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Add a tag"
   }
  },
  "/v1/apps/{app}/devices/{device}/tokens": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "device": {
           "type": "string"
          },
          "tokens": {
           "items": {
            "$ref": "#/components/schemas/KindToken"
           },
           "type": "array"
          }
         },
         "required": [
          "device",
          "tokens"
         ],
         "type": "object"
        }
       }
      },
      "description": "the device's tokens of other kinds"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A device's tokens of other kinds than alert, with their state"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/devices/{device}/tokens/{kind}": {
   "delete": {
    "parameters": [
     {
      "description": "liveactivity_start: which attributes type's token",
      "in": "query",
      "name": "attributes_type",
      "required": false,
      "schema": {
       "type": "string"
      }
     },
     {
      "description": "liveactivity_update: which activity's token",
      "in": "query",
      "name": "activity_id",
      "required": false,
      "schema": {
       "type": "string"
      }
     }
    ],
    "responses": {
     "204": {
      "description": "removed"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device or token"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Remove a device's token of one kind"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the token's kind (alert is the device's own token)",
     "in": "path",
     "name": "kind",
     "required": true,
     "schema": {
      "enum": [
       "voip",
       "liveactivity_start",
       "liveactivity_update",
       "widgets",
       "controls",
       "complication",
       "fileprovider",
       "location",
       "pushtotalk"
      ],
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/KindTokenInput"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/KindTokenRegistered"
        }
       }
      },
      "description": "replaced"
     },
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/KindTokenRegistered"
        }
       }
      },
      "description": "registered"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Register or replace a device's token of another kind than alert (VoIP, Live Activity, widgets…)"
   }
  },
  "/v1/apps/{app}/events": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/EventBatch"
       }
      }
     },
     "required": true
    },
    "responses": {
     "202": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/EventsAccepted"
        }
       }
      },
      "description": "every event is on the events topic"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "413": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the body is over --max-body"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/InvalidEvents"
        }
       }
      },
      "description": "some events cannot be counted (each named), or more than 1,000"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Report engagement events (up to 1,000): taken whole or refused whole"
   }
  },
  "/v1/apps/{app}/messages": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "parameters": [
     {
      "in": "header",
      "name": "Idempotency-Key",
      "required": false,
      "schema": {
       "maxLength": 255,
       "minLength": 1,
       "type": "string"
      }
     }
    ],
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/TransactionalMessage"
       }
      }
     },
     "required": true
    },
    "responses": {
     "202": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/MessageAccepted"
        }
       }
      },
      "description": "stored and on its way: one result per device follows on the results topic",
      "headers": {
       "Location": {
        "schema": {
         "type": "string"
        }
       }
      }
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the Idempotency-Key's first request is still running, or the key was used with another body"
     },
     "413": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "too large"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "422": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no recipient has an active device (error.recipients says why, per recipient), too many devices, or a template or reference the app does not have"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Send a transactional message now to users, aliases and devices (docs/api.md#messages)"
   }
  },
  "/v1/apps/{app}/messages/{message}": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/CampaignStatus"
        }
       }
      },
      "description": "the message"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such message"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A message's status and counts"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "message",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/segments": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "segments"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Saved segments"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/segments/count": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "post": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "segment": {
          "type": "string"
         }
        },
        "required": [
         "segment"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "count"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "How many active devices a segment matches"
   }
  },
  "/v1/apps/{app}/segments/{name}": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "segment"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such segment"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A saved segment"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "name",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "expression": {
          "type": "string"
         }
        },
        "required": [
         "expression"
        ],
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "replaced"
     },
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "saved"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Save a segment"
   }
  },
  "/v1/apps/{app}/templates": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "templates"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Stored notification templates"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/templates/{name}": {
   "delete": {
    "responses": {
     "204": {
      "description": "removed"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such segment"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Remove a stored template (campaigns already planned with it keep their copy)"
   },
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "template"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such template"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A stored notification template"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "name",
     "required": true,
     "schema": {
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "actions": {
          "items": {
           "properties": {
            "id": {
             "pattern": "^[A-Za-z0-9._:-]{1,128}$",
             "type": "string"
            },
            "params": {
             "type": "object"
            }
           },
           "required": [
            "id"
           ],
           "type": "object"
          },
          "maxItems": 10,
          "type": "array"
         },
         "category": {
          "maxLength": 255,
          "minLength": 1,
          "type": "string"
         },
         "interruption_level": {
          "enum": [
           "passive",
           "active",
           "time-sensitive",
           "critical"
          ]
         },
         "media_url": {
          "format": "uri",
          "maxLength": 2048,
          "type": "string"
         },
         "mutable_content": {
          "type": "boolean"
         },
         "summary_arg": {
          "maxLength": 255,
          "minLength": 1,
          "type": "string"
         },
         "summary_arg_count": {
          "minimum": 1,
          "type": "integer"
         },
         "thread_id": {
          "maxLength": 255,
          "minLength": 1,
          "type": "string"
         }
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "replaced"
     },
     "201": {
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      },
      "description": "saved"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Save or replace a notification template (category, rich media, thread, hidden-preview summary, interruption level, actions)"
   }
  },
  "/v1/apps/{app}/users/{user}": {
   "delete": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "devices": {
           "items": {
            "type": "string"
           },
           "type": "array"
          },
          "erased": {
           "type": "boolean"
          },
          "user_id": {
           "type": "string"
          }
         },
         "required": [
          "user_id",
          "erased",
          "devices"
         ],
         "type": "object"
        }
       }
      },
      "description": "erased"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no device names the user and it has no alias"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Erase a user: its devices and everything kept about them, its aliases; a tombstone on the results and events topics"
   },
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/User"
        }
       }
      },
      "description": "the user"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no device names the user and it has no alias"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "A user: its aliases and devices"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the app's id of the user, 1-256 bytes",
     "in": "path",
     "name": "user",
     "required": true,
     "schema": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  },
  "/v1/apps/{app}/users/{user}/aliases": {
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the app's id of the user, 1-256 bytes",
     "in": "path",
     "name": "user",
     "required": true,
     "schema": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "additionalProperties": {
         "maxLength": 256,
         "minLength": 1,
         "type": "string"
        },
        "maxProperties": 8,
        "propertyNames": {
         "pattern": "^[a-z0-9_]{1,32}$"
        },
        "type": "object"
       }
      }
     },
     "required": true
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/User"
        }
       }
      },
      "description": "the user"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "an alias value another user of the app holds (alias_taken, naming the field); nothing changed"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Replace the user's aliases (an empty object removes them)"
   }
  },
  "/v1/apps/{app}/users/{user}/devices/{device}": {
   "delete": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "token": {
          "description": "the device's own APNs token (hex): needed with the application secret",
          "type": "string"
         }
        },
        "type": "object"
       }
      }
     },
     "required": false
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the application secret on a master-only route, or without the device's own token (user_change_needs_device)"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device, or it is not the user's"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Unlink a device from the user"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the app's id of the user, 1-256 bytes",
     "in": "path",
     "name": "user",
     "required": true,
     "schema": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "in": "path",
     "name": "device",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    }
   ],
   "put": {
    "requestBody": {
     "content": {
      "application/json": {
       "schema": {
        "properties": {
         "token": {
          "description": "the device's own APNs token (hex): needed with the application secret",
          "type": "string"
         }
        },
        "type": "object"
       }
      }
     },
     "required": false
    },
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      },
      "description": "the device as it is now"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the application secret on a master-only route, or without the device's own token (user_change_needs_device)"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no such device"
     },
     "409": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "the device is not active"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "appSecret": []
     }
    ],
    "summary": "Link a device to the user (its user_id attribute)"
   }
  },
  "/v1/apps/{app}/users/{user}/export": {
   "get": {
    "responses": {
     "200": {
      "content": {
       "application/json": {
        "schema": {
         "properties": {
          "aliases": {
           "additionalProperties": {
            "type": "string"
           },
           "type": "object"
          },
          "app": {
           "type": "string"
          },
          "devices": {
           "items": {
            "type": "object"
           },
           "type": "array"
          },
          "user_id": {
           "type": "string"
          }
         },
         "required": [
          "app",
          "user_id",
          "aliases",
          "devices"
         ],
         "type": "object"
        }
       }
      },
      "description": "the export"
     },
     "400": {
      "$ref": "#/components/responses/Invalid"
     },
     "401": {
      "$ref": "#/components/responses/Unauthorized"
     },
     "403": {
      "$ref": "#/components/responses/Forbidden"
     },
     "404": {
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Error"
        }
       }
      },
      "description": "no device names the user and it has no alias"
     },
     "415": {
      "$ref": "#/components/responses/Unsupported"
     },
     "429": {
      "$ref": "#/components/responses/Throttled"
     },
     "503": {
      "$ref": "#/components/responses/Unavailable"
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "summary": "Everything kept about a user: its aliases and devices with tokens, ledger rows, capped pushes, engagement and SDK documents (docs/api.md#erasure-and-export)"
   },
   "parameters": [
    {
     "in": "path",
     "name": "app",
     "required": true,
     "schema": {
      "minLength": 1,
      "type": "string"
     }
    },
    {
     "description": "the app's id of the user, 1-256 bytes",
     "in": "path",
     "name": "user",
     "required": true,
     "schema": {
      "maxLength": 256,
      "minLength": 1,
      "type": "string"
     }
    }
   ]
  }
 }
}
"""#
}
