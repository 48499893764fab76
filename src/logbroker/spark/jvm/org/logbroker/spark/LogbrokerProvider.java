package org.logbroker.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.DataSourceManager;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Format {@code logbroker} on the JVM: the same name, schema and options
 * as the Python source (spark/source.py), which stays the fallback and
 * serves what this connector hands to it (streams, writes, bootstrap reads
 * without {@code paths}, {@code engine=python}).
 *
 * <p>Batch writes take Spark's V1 path, {@link #createRelation} (the table
 * declares no BATCH_WRITE: Spark 4 refuses errorifexists for a V2 table that
 * has it): a plain {@code df.write.format("logbroker").save()} (Spark's
 * default mode, errorifexists) appends as Spark's Kafka sink does, as does
 * {@code mode("append")}; overwrite and ignore are refused. The rows go to
 * the Python sink through its V2 append, as format {@link #PYTHON_NAME}: the
 * same Python source under a second name (module pyspark_logbroker_python,
 * found by Spark at start-up, or logbroker.spark.register).
 */
public final class LogbrokerProvider
    implements TableProvider, DataSourceRegister, CreatableRelationProvider {

  /** The Python source's second name in a session: its sink without this provider in the way. */
  static final String PYTHON_NAME = "logbroker_python";

  @Override
  public String shortName() {
    return "logbroker";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Schemas.full(Schemas.includeHeaders(options));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new LogbrokerTable(schema, partitioning, properties);
  }

  @Override
  public BaseRelation createRelation(SQLContext sqlContext, SaveMode mode,
                                     scala.collection.immutable.Map<String, String> parameters,
                                     Dataset<Row> data) {
    if (mode == SaveMode.Overwrite || mode == SaveMode.Ignore) {
      String name = mode == SaveMode.Overwrite ? "overwrite" : "ignore";
      throw new IllegalArgumentException("the logbroker sink only appends to topics: use "
          + "mode(\"append\"), not mode(\"" + name + "\")");
    }
    Map<String, String> options = new HashMap<>(CollectionConverters.asJava(parameters));
    DataSourceManager sources =
        ((org.apache.spark.sql.classic.SparkSession) sqlContext.sparkSession())
            .sessionState().dataSourceManager();
    if (!sources.dataSourceExists(PYTHON_NAME)) {
      throw new IllegalStateException("the logbroker sink writes through the Python source "
          + PYTHON_NAME + ", which this session does not have: install logbroker[spark] where "
          + "the driver's Python finds it, or call logbroker.spark.register(spark)");
    }
    data.write().format(PYTHON_NAME).mode(SaveMode.Append).options(options).save();
    StructType schema = data.schema();
    return new BaseRelation() {
      @Override
      public SQLContext sqlContext() {
        return sqlContext;
      }

      @Override
      public StructType schema() {
        return schema;
      }
    };
  }
}
